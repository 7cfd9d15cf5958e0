"""A package, program or server a test needs and this machine lacks: skipped here, a failure in CI.

CI (``CI=true``, `.ci/run`) installs every dependency of the suite, so a missing one there is a broken
install step, not a reason to pass: :func:`missing` fails the test instead of skipping it.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def missing(reason: str) -> NoReturn:
    """Skip the test for ``reason`` (what is missing and how to install it); under ``CI=true``, fail it."""
    if in_ci():
        pytest.fail(f"CI=true and a dependency is missing (.ci/run must install it): {reason}", pytrace=False)
    pytest.skip(reason)


def require_file(path: Path, reason: str) -> Path:
    """``path``, which a package installs; :func:`missing` when it is absent."""
    if not path.is_file():
        missing(reason)
    return path


def require_program(name: str, reason: str, folder: Path | None = None) -> str:
    """The program ``name`` on PATH (or in ``folder``); :func:`missing` when it is absent."""
    found = shutil.which(name, path=None if folder is None else str(folder))
    if found is None:
        missing(reason)
    return found


def require_module(name: str, reason: str):
    """The imported module ``name``; :func:`missing` when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(reason)
