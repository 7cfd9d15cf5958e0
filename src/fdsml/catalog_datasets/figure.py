"""The Kedro dataset for a picture a node may or may not draw: a matplotlib figure written as one image file, atomically.

Kedro refuses to save ``None``, so a node with nothing to draw (a study file without ``figure:``)
returns a figure without axes. That is no picture: nothing is written, and a picture an earlier run
left at the path is removed, so the folder never shows a figure its page does not link.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from kedro.io import AbstractDataset, DatasetError

from fdsml.atomic import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class FigureDataset(AbstractDataset["Figure", NoReturn]):
    """Saves a figure to ``filepath`` (its format from the suffix, ``save_args`` to ``savefig``); write-only."""

    def __init__(self, filepath: str, save_args: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self._save_args = dict(save_args or {})
        self.metadata = metadata

    def load(self) -> NoReturn:
        raise DatasetError(f"{self._filepath}: a FigureDataset is write-only; open the image file itself")

    def save(self, data: Figure) -> None:
        if not data.axes:
            self._filepath.unlink(missing_ok=True)
            return
        with atomic_path(self._filepath) as temporary:
            data.savefig(temporary, **self._save_args)

    def _exists(self) -> bool:
        return self._filepath.is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "save_args": self._save_args}
