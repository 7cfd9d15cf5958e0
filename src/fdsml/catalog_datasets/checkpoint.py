"""The Kedro dataset for model files: atomic ``torch.save``, ``weights_only=True`` load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset

from fdsml.models.checkpoint import load_checkpoint_file, save_checkpoint


class CheckpointDataset(AbstractDataset[dict[str, Any], dict[str, Any]]):
    """Saves and loads the dict of :func:`fdsml.models.model_payload` (configuration, weights, metadata).

    Turn it into a model with ``fdsml.models.load_checkpoint(path)`` or ``build_model(**payload["model"])``.
    """

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> dict[str, Any]:
        return load_checkpoint_file(self._filepath)

    def save(self, data: dict[str, Any]) -> None:
        save_checkpoint(self._filepath, data)

    def _exists(self) -> bool:
        return self._filepath.exists()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}
