"""``cars``: Cars-196 (``cars_annos.mat``, ``car_ims/``); the first 98 classes train, the other 98 test
(``retrieval.data.train_classes`` changes the 98)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdsml.data.layout import DatasetLayoutError, check_images_exist, require_file, require_folder
from fdsml.data.retrieval_datasets import ImageRecords, RetrievalSplits, register_reader, split_by_class_rank

_CARS = "Cars-196"
_CARS_FILES = "cars_annos.mat (struct array 'annotations' with fields relative_im_path and class) and car_ims/"
CARS_TRAIN_CLASSES = 98  # the protocol's zero-shot split


@register_reader("cars", ks=(1, 4, 16), class_split=True, protocol_keeps_copies=True)
def _read_cars(root: Path | None, train_classes: int | None) -> RetrievalSplits:
    from scipy.io import loadmat

    root = require_folder(root, _CARS, _CARS_FILES)
    annotations_file = require_file(root / "cars_annos.mat", _CARS, _CARS_FILES)
    try:
        content = loadmat(annotations_file, squeeze_me=True)
    except Exception as error:  # scipy raises several types for a file that is not MATLAB's
        raise DatasetLayoutError(f"{_CARS}: cannot read {annotations_file}: {error}") from error
    annotations = content.get("annotations")
    fields = () if annotations is None or annotations.dtype.names is None else annotations.dtype.names
    if not {"relative_im_path", "class"} <= set(fields):
        raise DatasetLayoutError(
            f"{_CARS}: cars_annos.mat has no 'annotations' struct with fields relative_im_path and class "
            f"(found {sorted(content) if annotations is None else list(fields)})"
        )
    annotations = np.atleast_1d(annotations)
    paths = [root / str(p) for p in annotations["relative_im_path"]]
    records = ImageRecords(labels=np.array([int(c) for c in annotations["class"]]), paths=paths)
    check_images_exist(records.paths, _CARS)
    train, test = split_by_class_rank(records, CARS_TRAIN_CLASSES if train_classes is None else train_classes, _CARS, expected_total=196)
    return RetrievalSplits(name="cars", train=train, test=test, ks=())
