"""``cub``: CUB-200-2011 (``images.txt``, ``image_class_labels.txt``, ``images/``); the first 100 classes train,
the other 100 test (``retrieval.data.train_classes`` changes the 100)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdsml.data.layout import DatasetLayoutError, as_int, check_images_exist, listing_rows, require_file, require_folder
from fdsml.data.retrieval_datasets import ImageRecords, RetrievalSplits, register_reader, split_by_class_rank

_CUB = "CUB-200-2011"
_CUB_FILES = "images.txt, image_class_labels.txt and images/"

CUB_TRAIN_CLASSES = 100  # the protocol's zero-shot split


@register_reader("cub", ks=(1, 2, 4, 8), class_split=True, protocol_keeps_copies=True)
def _read_cub(root: Path | None, train_classes: int | None) -> RetrievalSplits:
    root = require_folder(root, _CUB, _CUB_FILES)
    images_txt = require_file(root / "images.txt", _CUB, _CUB_FILES)
    labels_txt = require_file(root / "image_class_labels.txt", _CUB, _CUB_FILES)
    if not (root / "images").is_dir():
        raise DatasetLayoutError(f"{_CUB}: images/ not found in {root}; the folder must contain {_CUB_FILES}")
    paths = {as_int(i, images_txt, _CUB): p for i, p in listing_rows(images_txt, 2, _CUB)}
    labels = {as_int(i, labels_txt, _CUB): as_int(c, labels_txt, _CUB) for i, c in listing_rows(labels_txt, 2, _CUB)}
    if set(paths) != set(labels):
        raise DatasetLayoutError(f"{_CUB}: images.txt and image_class_labels.txt list different image ids")
    ids = sorted(paths)
    records = ImageRecords(labels=np.array([labels[i] for i in ids]), paths=[root / "images" / paths[i] for i in ids])
    check_images_exist(records.paths, _CUB)
    train, test = split_by_class_rank(records, CUB_TRAIN_CLASSES if train_classes is None else train_classes, _CUB, expected_total=200)
    return RetrievalSplits(name="cub", train=train, test=test, ks=())
