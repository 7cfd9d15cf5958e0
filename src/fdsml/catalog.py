"""The project's data catalog: every file output is written atomically; under ``torchrun`` only rank 0 writes.

kedro-datasets writes Parquet, JSON, CSV, text and PNG files in place, so a run killed mid-write
would leave a truncated file that the next run reads. Here each local, unversioned file dataset
saves into a temporary beside its target, which is then renamed over it (:mod:`fdsml.atomic`).

Under ``torchrun -m kedro run`` every replica runs the whole pipeline. Ranks above 0 compute the
same values (every node is deterministic) and hand them to their next node in memory. A dataset
whose load differs from what it saved (one with ``verify_reload``, e.g. a generator of shards in,
memory-mapped shards and their folder out) is instead left to rank 0: the other ranks wait for its
save, check that they see what it wrote, and load the same file, so that file must be on storage
every rank sees.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io import DataCatalog, DatasetError, MemoryDataset

from fdsml.atomic import atomic_path
from fdsml.config import ConfigError
from fdsml.errors import find_user_error


class UnreadableArtefactError(ConfigError):
    """A stored artefact exists but cannot be read: truncated, garbled or hand-edited into another format."""


class RankAwareDataCatalog(DataCatalog):
    """``DataCatalog`` with atomic file saves, whose saves on ranks other than 0 go to memory or wait for rank 0's file."""

    def load(self, ds_name: str, version: str | None = None) -> Any:
        try:
            return super().load(ds_name, version)
        except DatasetError as error:
            dataset, cause = self[ds_name], error.__cause__ or error
            if find_user_error(error) is not None or not dataset.exists():
                raise
            path = local_file_target(getattr(dataset, "_dataset", dataset)) or "the stored file"
            raise UnreadableArtefactError(
                f"{ds_name}: {path} cannot be read, it is truncated or garbled ({type(cause).__name__}: "
                f"{str(cause).splitlines()[0]}); delete it and run the pipeline that writes it again "
                "(`dvc repro`, or `kedro run --pipelines=...`)"
            ) from error

    def save(self, ds_name: str, data: Any) -> None:
        main = int(os.environ.get("RANK", "0")) == 0
        dataset = self.get(ds_name)
        if hasattr(dataset, "verify_reload"):
            if main:
                super().save(ds_name, data)
            from fdsml import distributed  # here: torch loads with the first save, not with the command line

            distributed.await_main_rank()
            if not main:
                dataset.verify_reload(data)
            return
        if not main:
            self[ds_name] = MemoryDataset(copy_mode="assign")
        dataset = self[ds_name]
        target = local_file_target(dataset)
        if target is None:
            super().save(ds_name, data)
            return
        with atomic_path(target) as temporary:
            DataCatalog({ds_name: redirected(dataset, temporary)}).save(ds_name, data)
        if hasattr(dataset, "_invalidate_cache"):
            dataset._invalidate_cache()


def local_file_target(dataset: Any) -> Path | None:
    """The local file a kedro-datasets file dataset writes, or None (memory, remote, versioned, own atomic save)."""
    filepath = getattr(dataset, "_filepath", None)
    if filepath is None or getattr(dataset, "_protocol", None) != "file" or getattr(dataset, "_version", None):
        return None
    return Path(str(filepath))


def redirected(dataset: Any, path: Path) -> Any:
    """A shallow copy of ``dataset`` that writes to ``path`` instead of its own file."""
    aside = copy.copy(dataset)
    aside._filepath = PurePosixPath(path)
    return aside
