"""A folder of ``.npy`` shards plus a manifest: rendered images materialised on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from kedro.io import AbstractDataset, DatasetError

from fdsml.atomic import atomic_path

MANIFEST = "manifest.json"


class ArrayShardsDataset(AbstractDataset[dict[str, Any], dict[str, Any]]):
    """Saves ``{"shards": iterable of arrays, **metadata}``; loads ``{"shards": [memmapped arrays], "folder": path, **metadata}``.

    ``shards`` may be a generator: each shard is written as it arrives, so a dataset larger than
    memory can be materialised. The folder is written whole and swapped in atomically. It may hold
    no shard (nothing materialised); the manifest still says so, so the output exists for DVC.
    """

    # What load gives is not what save took: under torchrun, ranks above 0 load rank 0's folder
    # (fdsml.catalog) instead of keeping the generator.
    RELOAD_AFTER_SAVE = True

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> dict[str, Any]:
        manifest_path = self._filepath / MANIFEST
        if not manifest_path.exists():
            raise DatasetError(f"{self._filepath}: no {MANIFEST}; run the fractals pipeline with materialize: true")
        manifest = json.loads(manifest_path.read_text())
        manifest["shards"] = [np.load(self._filepath / name, mmap_mode="r") for name in manifest["shards"]]
        return {**manifest, "folder": str(self._filepath)}

    def save(self, data: dict[str, Any]) -> None:
        metadata = {key: value for key, value in data.items() if key not in ("shards", "folder")}
        with atomic_path(self._filepath, directory=True) as folder:
            names, count = [], 0
            for index, shard in enumerate(data["shards"]):
                names.append(f"shard_{index:05d}.npy")
                np.save(folder / names[-1], np.asarray(shard))
                count += len(shard)
            manifest = {**metadata, "shards": names, "count": count}
            (folder / MANIFEST).write_text(json.dumps(manifest, indent=2))

    def _exists(self) -> bool:
        return (self._filepath / MANIFEST).exists()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}
