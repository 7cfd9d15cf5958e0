"""A data catalog for ``torchrun``: only rank 0 writes artefacts; the other replicas keep theirs in memory.

Under ``torchrun -m kedro run`` every replica runs the whole pipeline. Without this, N processes
would race to write the same files; with it, ranks above 0 compute the same values (every node
is deterministic) and hand them to their next node in memory.
"""

from __future__ import annotations

import os
from typing import Any

from kedro.io import DataCatalog, MemoryDataset


class RankAwareDataCatalog(DataCatalog):
    """``DataCatalog`` whose saves on ranks other than 0 go to memory instead of files."""

    def save(self, ds_name: str, data: Any) -> None:
        if int(os.environ.get("RANK", "0")) != 0:
            self[ds_name] = MemoryDataset(copy_mode="assign")
        super().save(ds_name, data)
