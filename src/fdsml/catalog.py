"""A data catalog for ``torchrun``: only rank 0 writes artefacts; every rank gets what a load would give.

Under ``torchrun -m kedro run`` every replica runs the whole pipeline. Without this, N processes
would race to write the same files; with it, ranks above 0 compute the same values (every node
is deterministic) and hand them to their next node in memory. A dataset whose load differs from
what it saved (one with ``verify_reload``, e.g. a generator of shards in, memory-mapped shards and
their folder out) is instead left to rank 0: the other ranks wait for its save, check that they
see what it wrote, and load the same file, so that file must be on storage every rank sees.
"""

from __future__ import annotations

import os
from typing import Any

from kedro.io import DataCatalog, MemoryDataset

from fdsml.training import distributed


class RankAwareDataCatalog(DataCatalog):
    """``DataCatalog`` whose saves on ranks other than 0 go to memory, or wait for rank 0's file."""

    def save(self, ds_name: str, data: Any) -> None:
        main = int(os.environ.get("RANK", "0")) == 0
        dataset = self.get(ds_name)
        if hasattr(dataset, "verify_reload"):
            if main:
                super().save(ds_name, data)
            distributed.await_main_rank()
            if not main:
                dataset.verify_reload(data)
            return
        if not main:
            self[ds_name] = MemoryDataset(copy_mode="assign")
        super().save(ds_name, data)
