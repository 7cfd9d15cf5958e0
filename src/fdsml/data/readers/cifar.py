"""``cifar10`` / ``cifar100``: torchvision's classes on ``root/cifar-10-batches-py`` / ``root/cifar-100-python``
(the "python version" archives, unpacked), never downloading."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdsml.data.classification_datasets import ClassificationSplits, open_torchvision, register_classification_reader
from fdsml.data.layout import require_folder
from fdsml.data.retrieval_datasets import ImageRecords


def _cifar(root: Path | None, factory_name: str, title: str, expected: str, num_classes: int, name: str) -> ClassificationSplits:
    import torchvision.datasets as tvd

    root = require_folder(root, title, expected)
    factory = getattr(tvd, factory_name)
    parts = [open_torchvision(factory, root, title, expected, train=train) for train in (True, False)]
    train, test = (ImageRecords(labels=np.asarray(p.targets), images=np.asarray(p.data)) for p in parts)
    return ClassificationSplits(name, train, test, num_classes, tuple(parts[0].classes))


_CIFAR10_FILES = "cifar-10-batches-py/ (data_batch_1..5, test_batch, batches.meta: the unpacked python version)"
_CIFAR100_FILES = "cifar-100-python/ (train, test, meta: the unpacked python version)"


@register_classification_reader("cifar10", protocol_keeps_copies=True)
def _read_cifar10(root: Path | None, seed: int) -> ClassificationSplits:
    return _cifar(root, "CIFAR10", "CIFAR-10", _CIFAR10_FILES, 10, "cifar10")


@register_classification_reader("cifar100", protocol_keeps_copies=True)
def _read_cifar100(root: Path | None, seed: int) -> ClassificationSplits:
    return _cifar(root, "CIFAR100", "CIFAR-100", _CIFAR100_FILES, 100, "cifar100")
