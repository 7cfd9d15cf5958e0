"""Custom Kedro datasets: atomic writes for the artefacts kedro-datasets does not cover."""

from fdsml.datasets.array_shards import ArrayShardsDataset
from fdsml.datasets.atomic import atomic_path

__all__ = ["ArrayShardsDataset", "atomic_path"]
