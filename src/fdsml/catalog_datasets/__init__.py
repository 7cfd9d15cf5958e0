"""Custom Kedro datasets: atomic writes for the artefacts kedro-datasets does not cover."""

from fdsml.catalog_datasets.array_shards import ArrayShardsDataset
from fdsml.catalog_datasets.checkpoint import CheckpointDataset
from fdsml.catalog_datasets.figure import FigureDataset
from fdsml.catalog_datasets.optional import OptionalDataset
from fdsml.catalog_datasets.timm_folder import TimmFolderDataset

__all__ = ["ArrayShardsDataset", "CheckpointDataset", "FigureDataset", "OptionalDataset", "TimmFolderDataset"]
