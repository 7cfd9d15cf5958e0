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
        metadata = _metadata(data)
        with atomic_path(self._filepath, directory=True) as folder:
            names, count = [], 0
            for index, shard in enumerate(data["shards"]):
                names.append(f"shard_{index:05d}.npy")
                np.save(folder / names[-1], np.asarray(shard))
                count += len(shard)
            manifest = {**metadata, "shards": names, "count": count}
            (folder / MANIFEST).write_text(json.dumps(manifest, indent=2))

    def verify_reload(self, data: dict[str, Any]) -> None:
        """Raise unless the folder holds what ``save(data)`` writes, saved by another process (rank 0).

        What load gives is not what save took (a generator in, memory-mapped shards out), so under
        torchrun ranks above 0 load rank 0's folder (:mod:`fdsml.catalog`) and check it first: a
        node-local folder from another run must not be trained on.
        """
        found = json.loads((self._filepath / MANIFEST).read_text()) if self._exists() else {}
        expected = json.loads(json.dumps(_metadata(data)))
        if {key: found.get(key) for key in expected} != expected:
            raise DatasetError(
                f"{self._filepath}: does not hold the renderings rank 0 just wrote (this process cannot see its folder); "
                "put it on storage every node sees, or materialise on each node first (kedro run --pipeline=fractals)"
            )

    def _exists(self) -> bool:
        return (self._filepath / MANIFEST).exists()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}


def _metadata(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key not in ("shards", "folder")}
