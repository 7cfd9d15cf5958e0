"""Torch datasets and samplers: FineFractalDB (on the fly or sharded), class-balanced and explicit-triplet batches;
the registries of the datasets' readers (the readers themselves in :mod:`fdsml.data.readers`) and an image
dataset over their records."""

from fdsml.data.fractal_dataset import FractalCodesDataset, ShardedImagesDataset, fractal_input, fresh_noise_seed
from fdsml.data.layout import DatasetLayoutError
from fdsml.data.retrieval_datasets import (
    ImageRecords,
    RetrievalSplits,
    available_datasets,
    read_retrieval_dataset,
    reader_module,
    recommended_ks,
    register_reader,
)
from fdsml.data.samplers import ClassBalancedBatchSampler, ExplicitTripletBatchSampler, ShuffledBatchSampler

# torchvision costs seconds to import: the image pipeline loads on first use.
_LAZY = {name: "fdsml.data.image_records" for name in ("ImageRecordsDataset", "ImageTransform", "load_image")}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ClassBalancedBatchSampler",
    "DatasetLayoutError",
    "ExplicitTripletBatchSampler",
    "FractalCodesDataset",
    "ImageRecords",
    "ImageRecordsDataset",
    "ImageTransform",
    "RetrievalSplits",
    "ShardedImagesDataset",
    "ShuffledBatchSampler",
    "available_datasets",
    "fractal_input",
    "fresh_noise_seed",
    "load_image",
    "read_retrieval_dataset",
    "reader_module",
    "recommended_ks",
    "register_reader",
]
