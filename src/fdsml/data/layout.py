"""Checks on a dataset folder shared by every reader: one error type, one message for a missing folder."""

from __future__ import annotations

from pathlib import Path

from fdsml.errors import UserFixableError


class DatasetLayoutError(UserFixableError, ValueError):
    """A dataset folder is missing, or does not hold the files its layout expects."""


def require_folder(root: Path | None, title: str, expected: str) -> Path:
    """``root`` when it is an existing folder; otherwise an error naming the dataset and what the folder must hold."""
    if root is None:
        raise DatasetLayoutError(f"{title}: give the dataset folder (root); it must contain {expected}")
    if not root.is_dir():
        raise DatasetLayoutError(f"{title}: folder {root} not found; it must contain {expected}")
    return root
