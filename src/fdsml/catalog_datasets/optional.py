"""A dataset that may not exist yet: loads as ``None`` instead of failing.

Lets a node see the artefact a previous run left (to reuse it when it is still up to date)
without Kedro refusing to start when there is none.
"""

from __future__ import annotations

from typing import Any

from kedro.io import AbstractDataset
from kedro.io.core import parse_dataset_definition


class OptionalDataset(AbstractDataset[Any, Any]):
    """Wraps the dataset described by ``dataset`` (a catalog entry); read-only."""

    def __init__(self, dataset: dict[str, Any], metadata: dict[str, Any] | None = None):
        dataset_class, arguments = parse_dataset_definition(dict(dataset))
        self._dataset = dataset_class(**arguments)
        self.metadata = metadata

    def load(self) -> Any:
        return self._dataset.load() if self._dataset.exists() else None

    def save(self, data: Any) -> None:
        raise NotImplementedError("OptionalDataset is read-only: save through the wrapped dataset's own entry")

    def _exists(self) -> bool:
        return True

    def _describe(self) -> dict[str, Any]:
        return {"dataset": self._dataset._describe()}
