"""``sop``: Stanford Online Products, its split given by ``Ebay_train.txt`` / ``Ebay_test.txt``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdsml.data.layout import DatasetLayoutError, as_int, check_images_exist, listing_rows, require_file, require_folder
from fdsml.data.retrieval_datasets import ImageRecords, RetrievalSplits, register_reader

_SOP = "Stanford Online Products"
_SOP_FILES = "Ebay_train.txt and Ebay_test.txt (columns image_id class_id super_class_id path) and the image folders"
_SOP_HEADER = ["image_id", "class_id", "super_class_id", "path"]


@register_reader("sop", ks=(1, 10, 100), protocol_keeps_copies=True)
def _read_sop(root: Path | None) -> RetrievalSplits:
    root = require_folder(root, _SOP, _SOP_FILES)
    parts = []
    for name in ("Ebay_train.txt", "Ebay_test.txt"):
        listing = require_file(root / name, _SOP, _SOP_FILES)
        header = listing.read_text().splitlines()[:1]
        if [h.lower() for h in (header[0].split() if header else [])] != _SOP_HEADER:
            raise DatasetLayoutError(f"{_SOP}: {name} must start with the header line {' '.join(_SOP_HEADER)}")
        rows = listing_rows(listing, 4, _SOP, skip=1)
        labels = np.array([as_int(row[1], listing, _SOP) for row in rows])
        parts.append(ImageRecords(labels=labels, paths=[root / row[3] for row in rows]))
    train, test = parts
    if np.intersect1d(train.classes, test.classes).size:
        raise DatasetLayoutError(f"{_SOP}: Ebay_train.txt and Ebay_test.txt share classes; the split must be zero-shot")
    for part in parts:
        check_images_exist(part.paths, _SOP)
    return RetrievalSplits(name="sop", train=train, test=test, ks=())
