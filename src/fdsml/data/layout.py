"""Checks on a dataset folder shared by every reader: one error type, one message for a missing folder or file,
a listing's rows, its ids, the images it lists."""

from __future__ import annotations

from collections.abc import Sequence
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


def require_file(path: Path, title: str, expected: str) -> Path:
    """``path`` when it is a file; otherwise an error naming the dataset, the file and what the folder must contain."""
    if not path.is_file():
        raise DatasetLayoutError(f"{title}: {path.name} not found in {path.parent}; the folder must contain {expected}")
    return path


def listing_rows(path: Path, columns: int, title: str, *, skip: int = 0) -> list[list[str]]:
    """Whitespace-separated rows of ``path`` after ``skip`` header lines, each with ``columns`` fields."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if number <= skip or not line.strip():
            continue
        fields = line.split()
        if len(fields) != columns:
            raise DatasetLayoutError(
                f"{title}: {path.name} line {number} has {len(fields)} fields, expected {columns}: {line!r}"
            )
        rows.append(fields)
    if not rows:
        raise DatasetLayoutError(f"{title}: {path.name} lists no images")
    return rows


def as_int(text: str, path: Path, title: str) -> int:
    """An integer id read from listing ``path``; otherwise an error naming the file and the text."""
    try:
        return int(text)
    except ValueError:
        raise DatasetLayoutError(f"{title}: {path.name} holds {text!r} where an integer id belongs") from None


def check_images_exist(paths: Sequence[Path], title: str) -> None:
    """Every listed image is a file; otherwise an error counting the missing ones, with a few of them."""
    missing = [p for p in paths if not p.is_file()]
    if missing:
        shown = ", ".join(str(p) for p in missing[:3])
        raise DatasetLayoutError(f"{title}: {len(missing)} of {len(paths)} listed images are missing, e.g. {shown}; restore them, or remove their lines from the listing")
