"""The Kedro dataset for an exported backbone: a folder timm loads with ``local-dir:``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset
from torch import nn

from fdsml.atomic import atomic_path
from fdsml.models.export import TimmExport, load_exported


class TimmFolderDataset(AbstractDataset[TimmExport, nn.Module]):
    """Saves a :class:`~fdsml.models.export.TimmExport` as a folder, swapped in whole; loads the timm model (features)."""

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> nn.Module:
        return load_exported(self._filepath, num_classes=0)

    def save(self, data: TimmExport) -> None:
        with atomic_path(self._filepath, directory=True) as temporary:
            data.save(temporary)

    def _exists(self) -> bool:
        return (self._filepath / "config.json").is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}
