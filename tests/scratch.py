"""Scratch copies of the project, for tests that run Kedro, DVC or torchrun as a user would."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_tracked(destination: Path, *paths: str) -> None:
    """Copy the files git tracks (under ``paths``, or all) into ``destination``, as they are on disk."""
    listed = subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in listed.stdout.splitlines():
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, destination / name)
