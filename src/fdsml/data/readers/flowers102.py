"""``flowers102``: torchvision's ``Flowers102`` on ``root/flowers-102``; train and val together train (2,040 images),
test tests (6,149), as usual when fine-tuning."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdsml.data.classification_datasets import ClassificationSplits, open_torchvision, register_classification_reader, torchvision_private
from fdsml.data.layout import require_folder
from fdsml.data.retrieval_datasets import ImageRecords

_FLOWERS = "Flowers-102"
_FLOWERS_FILES = "flowers-102/ with jpg/, imagelabels.mat and setid.mat"


@register_classification_reader("flowers102", protocol_keeps_copies=True)
def _read_flowers102(root: Path | None, seed: int) -> ClassificationSplits:
    from torchvision.datasets import Flowers102

    root = require_folder(root, _FLOWERS, _FLOWERS_FILES)
    records = {}
    for split in ("train", "val", "test"):
        dataset = open_torchvision(Flowers102, root, _FLOWERS, _FLOWERS_FILES, split=split)
        records[split] = (torchvision_private(dataset, "_labels"), torchvision_private(dataset, "_image_files"))
    train_labels = [*records["train"][0], *records["val"][0]]
    train_paths = [*records["train"][1], *records["val"][1]]
    train = ImageRecords(labels=np.array(train_labels), paths=train_paths)
    test = ImageRecords(labels=np.array(records["test"][0]), paths=records["test"][1])
    return ClassificationSplits("flowers102", train, test, 102)
