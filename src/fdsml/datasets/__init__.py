"""Custom Kedro datasets: atomic writes for the artefacts kedro-datasets does not cover."""

from fdsml.datasets.array_shards import ArrayShardsDataset
from fdsml.datasets.checkpoint import CheckpointDataset
from fdsml.datasets.optional import OptionalDataset
from fdsml.datasets.timm_folder import TimmFolderDataset

__all__ = ["ArrayShardsDataset", "CheckpointDataset", "OptionalDataset", "TimmFolderDataset"]
