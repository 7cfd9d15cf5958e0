"""``inshop``: In-Shop Clothes, ``list_eval_partition.txt`` (train / query / gallery), item ids as labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdsml.data.layout import DatasetLayoutError, as_int, check_images_exist, listing_rows, require_folder
from fdsml.data.retrieval_datasets import ImageRecords, RetrievalSplits, register_reader

_INSHOP = "In-Shop Clothes"
_INSHOP_FILES = (
    "list_eval_partition.txt (or Eval/list_eval_partition.txt: a count line, the header "
    "image_name item_id evaluation_status, then one row per image) and the img/ folder (or Img/img/)"
)
_INSHOP_STATUSES = ("train", "query", "gallery")


@register_reader("inshop", ks=(1, 10, 20), protocol_keeps_copies=True)
def _read_inshop(root: Path | None) -> RetrievalSplits:
    root = require_folder(root, _INSHOP, _INSHOP_FILES)
    candidates = [root / "list_eval_partition.txt", root / "Eval" / "list_eval_partition.txt"]
    listing = next((c for c in candidates if c.is_file()), None)
    if listing is None:
        raise DatasetLayoutError(f"{_INSHOP}: list_eval_partition.txt not found in {root}; expected {_INSHOP_FILES}")
    lines = listing.read_text().splitlines()
    if len(lines) < 2 or lines[1].split() != ["image_name", "item_id", "evaluation_status"]:
        raise DatasetLayoutError(f"{_INSHOP}: {listing} does not follow the layout: {_INSHOP_FILES}")
    rows = listing_rows(listing, 3, _INSHOP, skip=2)
    if as_int(lines[0].strip(), listing, _INSHOP) != len(rows):
        raise DatasetLayoutError(f"{_INSHOP}: {listing.name} announces {lines[0].strip()} images but lists {len(rows)}")
    unknown = sorted({row[2] for row in rows} - set(_INSHOP_STATUSES))
    if unknown:
        raise DatasetLayoutError(f"{_INSHOP}: unknown evaluation_status {unknown}; expected train, query or gallery")
    image_root = next((base for base in (root, root / "Img") if (base / rows[0][0]).is_file()), root)
    labels = np.array([_item_number(row[1], listing) for row in rows])
    statuses = np.array([row[2] for row in rows])
    records = ImageRecords(labels=labels, paths=[image_root / row[0] for row in rows])
    check_images_exist(records.paths, _INSHOP)
    train, query, gallery = (records.subset(statuses == s) for s in _INSHOP_STATUSES)
    if np.intersect1d(train.classes, np.union1d(query.classes, gallery.classes)).size:
        raise DatasetLayoutError(f"{_INSHOP}: train items reappear in query/gallery; the split must be zero-shot")
    return RetrievalSplits(name="inshop", train=train, query=query, gallery=gallery, ks=())


def _item_number(item_id: str, listing: Path) -> int:
    """``id_00000123`` -> 123."""
    prefix, _, number = item_id.partition("_")
    if prefix != "id" or not number.isdigit():
        raise DatasetLayoutError(f"{_INSHOP}: {listing.name} holds item id {item_id!r}; expected id_<digits>")
    return int(number)
