"""``imagenet1k``, ``imagenet100``, ``places30``: ``root/train/<class>/*`` and ``root/val/<class>/*`` (torchvision's
``ImageFolder``); the two splits must name the same classes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdsml.data.classification_datasets import ClassificationSplits, register_classification_reader
from fdsml.data.layout import DatasetLayoutError, require_folder
from fdsml.data.retrieval_datasets import ImageRecords


def _image_folder(root: Path | None, title: str, name: str) -> ClassificationSplits:
    from torchvision.datasets import ImageFolder

    expected = "train/<class>/<images> and val/<class>/<images> (one sub-folder per class, the same classes in both)"
    root = require_folder(root, title, expected)
    parts = []
    for split in ("train", "val"):
        folder = root / split
        if not folder.is_dir():
            raise DatasetLayoutError(f"{title}: {folder} not found; the folder must contain {expected}")
        try:
            dataset = ImageFolder(str(folder))
        except FileNotFoundError as error:
            raise DatasetLayoutError(f"{title}: {error}; the folder must contain {expected}") from error
        parts.append(dataset)
    train, val = parts
    if train.classes != val.classes:
        only = sorted(set(train.classes) ^ set(val.classes))
        raise DatasetLayoutError(f"{title}: train/ and val/ name different classes (e.g. {only[:3]}); {expected}")
    records = [ImageRecords(labels=np.array(p.targets), paths=[path for path, _ in p.samples]) for p in parts]
    return ClassificationSplits(name, records[0], records[1], len(train.classes), tuple(train.classes))


@register_classification_reader("imagenet1k", protocol_keeps_copies=True)
def _read_imagenet1k(root: Path | None, seed: int) -> ClassificationSplits:
    return _image_folder(root, "ImageNet-1k", "imagenet1k")


@register_classification_reader("imagenet100", protocol_keeps_copies=True)
def _read_imagenet100(root: Path | None, seed: int) -> ClassificationSplits:
    return _image_folder(root, "ImageNet-100", "imagenet100")


@register_classification_reader("places30", protocol_keeps_copies=True)
def _read_places30(root: Path | None, seed: int) -> ClassificationSplits:
    return _image_folder(root, "Places-30", "places30")
