"""``stanford_cars``: torchvision's ``StanfordCars`` on ``root/stanford_cars`` (196 classes, its own train / test halves)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdsml.data.classification_datasets import ClassificationSplits, open_torchvision, register_classification_reader, torchvision_private
from fdsml.data.layout import require_folder
from fdsml.data.retrieval_datasets import ImageRecords

_CARS = "Stanford Cars"
_CARS_FILES = (
    "stanford_cars/ with devkit/ (cars_meta.mat, cars_train_annos.mat), cars_train/, cars_test/ "
    "and cars_test_annos_withlabels.mat"
)


@register_classification_reader("stanford_cars", protocol_keeps_copies=True)
def _read_stanford_cars(root: Path | None, seed: int) -> ClassificationSplits:
    from torchvision.datasets import StanfordCars

    root = require_folder(root, _CARS, _CARS_FILES)
    parts, names = [], ()
    for split in ("train", "test"):
        dataset = open_torchvision(StanfordCars, root, _CARS, _CARS_FILES, split=split)
        samples, names = torchvision_private(dataset, "_samples"), tuple(dataset.classes)
        parts.append(ImageRecords(labels=np.array([label for _, label in samples]), paths=[path for path, _ in samples]))
    return ClassificationSplits("stanford_cars", parts[0], parts[1], len(names), names)
