"""Scratch copies of the project, for tests that run Kedro, DVC or torchrun as a user would."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_tracked(destination: Path, *paths: str) -> Path:
    """Copy the files git tracks or would track (under ``paths``, or all) into ``destination``, as they are on disk.

    Untracked files that git does not ignore come too, so a new file counts before it is committed;
    data, the virtual environment and local settings stay behind. Returns ``destination``.
    """
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *paths],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    return destination
