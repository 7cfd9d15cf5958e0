"""Readers for the standard deep-metric-learning dataset layouts, with their zero-shot splits.

Each layout is one small reader registered by name (``cub``, ``cars``, ``sop``,
``inshop``, ``digits``); :func:`read_retrieval_dataset` looks it up. Training and test
classes are disjoint, as the retrieval protocol requires:

* CUB-200-2011: the first 100 classes train, the other 100 test (``train_classes`` changes the 100).
* Cars-196 (``cars_annos.mat``): the first 98 classes train, the other 98 test (``train_classes`` changes the 98).
* Stanford Online Products: ``Ebay_train.txt`` / ``Ebay_test.txt``.
* In-Shop Clothes: ``list_eval_partition.txt`` (train / query / gallery), item ids as labels.
* digits (embedded, offline): scikit-learn's 8 x 8 handwritten digits, 0-4 train, 5-9 test.
* omniglot, omniglot_validation (embedded, offline): :mod:`fdsml.data.omniglot`, split by alphabet.
* imagefolder, csv (your own images): :mod:`fdsml.data.own_data`.

A layout that splits by class (``class_split``) takes the number of training classes
(``retrieval.data.train_classes``; None: the protocol's); the others have their split given.

Labels keep the dataset's own class ids; :meth:`ImageRecords.with_contiguous_labels`
gives 0..C-1 where a classifier or proxy loss needs them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fdsml.data.layout import DatasetLayoutError, require_folder

logger = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class ImageRecords:
    """Images of one split with their integer labels: file paths, or an in-memory uint8 array.

    ``images`` is (N, H, W) for grey or (N, H, W, 3) for colour.
    """

    labels: np.ndarray
    paths: tuple[Path, ...] | None = None
    images: np.ndarray | None = None

    def __post_init__(self) -> None:
        labels = np.asarray(self.labels)
        if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels must be a 1-D integer array, got shape {labels.shape} dtype {labels.dtype}")
        object.__setattr__(self, "labels", labels.astype(np.int64))
        if (self.paths is None) == (self.images is None):
            raise ValueError("give exactly one of paths or images")
        if self.paths is not None:
            object.__setattr__(self, "paths", tuple(Path(p) for p in self.paths))
            count = len(self.paths)
        else:
            images = np.asarray(self.images)
            if images.dtype != np.uint8 or not (images.ndim == 3 or (images.ndim == 4 and images.shape[3] == 3)):
                raise ValueError(f"images must be uint8 (N, H, W) or (N, H, W, 3), got {images.dtype} {images.shape}")
            count = len(images)
        if count != len(labels):
            raise ValueError(f"{count} images but {len(labels)} labels")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def classes(self) -> np.ndarray:
        """The distinct labels, sorted."""
        return np.unique(self.labels)

    def subset(self, mask: np.ndarray) -> ImageRecords:
        """The records selected by a boolean mask (or index array)."""
        paths = None if self.paths is None else tuple(np.asarray(self.paths, dtype=object)[mask])
        images = None if self.images is None else self.images[mask]
        return ImageRecords(labels=self.labels[mask], paths=paths, images=images)

    def listing_digest(self) -> str:
        """A SHA-256 of what the split holds, never where: labels, and each image file's name (relative to the
        files' common folder) and size in bytes, or the in-memory images' bytes.

        The annotation files decide the names and labels, so an edited annotation, a replaced image of
        another size or a changed label changes it; the same files under another folder do not.
        """
        hasher = hashlib.sha256(self.labels.tobytes())
        if self.paths is None:
            hasher.update(f"{self.images.dtype.str}{self.images.shape}".encode() + np.ascontiguousarray(self.images).tobytes())
            return hasher.hexdigest()
        common = os.path.commonpath([str(path.parent) for path in self.paths]) if self.paths else ""
        for path in self.paths:
            hasher.update(f"{os.path.relpath(path, common)}\0{path.stat().st_size}\n".encode())
        return hasher.hexdigest()

    def with_contiguous_labels(self) -> ImageRecords:
        """The same records with labels renumbered 0..C-1 in sorted order of the originals."""
        _, codes = np.unique(self.labels, return_inverse=True)
        return dataclasses.replace(self, labels=codes.astype(np.int64))


@dataclass(frozen=True, eq=False)
class RetrievalSplits:
    """A dataset's zero-shot splits and the Recall@K list it is reported with.

    Either ``test`` (every test item queries the others) or ``query`` + ``gallery``.
    """

    name: str
    train: ImageRecords
    ks: tuple[int, ...]
    test: ImageRecords | None = None
    query: ImageRecords | None = None
    gallery: ImageRecords | None = None

    def __post_init__(self) -> None:
        if (self.test is None) == (self.query is None or self.gallery is None):
            raise ValueError(f"{self.name}: give either test, or query and gallery")
        if (self.query is None) != (self.gallery is None):
            raise ValueError(f"{self.name}: query and gallery come together")

    @property
    def has_query_set(self) -> bool:
        return self.query is not None

    @property
    def lone_queries(self) -> int:
        """The queries with no other image of their class to find (a test class of one image; a query whose item the
        gallery lacks): they can neither succeed nor fail, so Recall@K, MAP@R and R-Precision leave them out."""
        if self.has_query_set:
            return int((~np.isin(self.query.labels, self.gallery.labels)).sum())
        _, counts = np.unique(self.test.labels, return_counts=True)
        return int((counts == 1).sum())

    def lone_queries_note(self) -> str | None:
        """One line saying how many queries the metrics leave out and why (None when every query has a match)."""
        lone = self.lone_queries
        if not lone:
            return None
        queries = len(self.query if self.has_query_set else self.test)
        why = "their item is not in the gallery" if self.has_query_set else "their test class holds that image alone"
        return (
            f"{self.name}: {lone} of {queries} queries have no other image of their class to find ({why}): Recall@K, "
            "MAP@R and R-Precision leave them out (NMI counts them); add images to those classes, or remove them"
        )


Reader = Callable[..., RetrievalSplits]
"""``reader(root) -> RetrievalSplits``; a layout that splits by class: ``reader(root, train_classes)``."""


@dataclass(frozen=True)
class _Layout:
    read: Reader
    ks: tuple[int, ...]
    named_by_root: bool
    class_split: bool
    protocol_keeps_copies: bool


_LAYOUTS: dict[str, _Layout] = {}


def register_reader(
    name: str, *, ks: Sequence[int], named_by_root: bool = False, class_split: bool = False, protocol_keeps_copies: bool = False
) -> Callable[[Reader], Reader]:
    """Register ``reader`` under ``name``, with its recommended Recall@K list.

    ``class_split``: the layout splits by class and its reader takes the number of training classes
    (None: its protocol's) after the root. ``named_by_root``: the dataset is named ``<name>-<root's
    stem>`` (your own layouts: two folders are two datasets, in their metrics and run folders).
    ``protocol_keeps_copies``: a standard benchmark scored on its files as shipped, so pixel-identical copies
    among them are counted and kept, not refused (:mod:`fdsml.data.leaks`).
    """

    def decorate(reader: Reader) -> Reader:
        if name in _LAYOUTS:
            raise ValueError(f"a dataset reader named {name!r} is already registered")
        _LAYOUTS[name] = _Layout(reader, tuple(ks), named_by_root, class_split, protocol_keeps_copies)
        return reader

    return decorate


def splits_by_class(name: str) -> bool:
    """Whether dataset ``name``'s split is by class rank (``train_classes`` applies) rather than given."""
    return _layout(name).class_split


def protocol_keeps_copies(name: str) -> bool:
    """Whether dataset ``name`` is a benchmark scored on its files as shipped, copies and all."""
    return _layout(name).protocol_keeps_copies


def available_datasets() -> list[str]:
    return sorted(_LAYOUTS)


def recommended_ks(name: str) -> tuple[int, ...]:
    """The Recall@K list the dataset is reported with."""
    return _layout(name).ks


def read_retrieval_dataset(name: str, root: str | Path | None = None, *, train_classes: int | None = None) -> RetrievalSplits:
    """Read dataset ``name`` from folder ``root`` (``digits`` needs none) into its zero-shot splits.

    ``train_classes``: how many of the sorted classes train, for the layouts that split by class
    (None: the protocol's, e.g. CUB's 100); refused for a layout whose split is given.
    """
    layout = _layout(name)
    root = None if root is None else Path(root).expanduser()
    if layout.class_split:
        splits = layout.read(root, train_classes)
    elif train_classes is not None:
        raise DatasetLayoutError(f"retrieval.data.train_classes: {name} has its split given by its files; leave it null")
    else:
        splits = layout.read(root)
    label = f"{name}-{root.stem}" if layout.named_by_root and root is not None else name
    splits = dataclasses.replace(splits, name=label, ks=layout.ks)
    sizes = [f"{len(getattr(splits, part))} {part}" for part in ("train", "test", "query", "gallery") if getattr(splits, part) is not None]
    logger.debug("dataset %s: %s images", name, ", ".join(sizes))
    return splits


def _layout(name: str) -> _Layout:
    if name not in _LAYOUTS:
        raise KeyError(f"unknown retrieval dataset {name!r}; available: {', '.join(available_datasets())}")
    return _LAYOUTS[name]


# --- helpers shared by the file-based readers -------------------------------------------


def _require_file(path: Path, title: str, expected: str) -> Path:
    if not path.is_file():
        raise DatasetLayoutError(f"{title}: {path.name} not found in {path.parent}; the folder must contain {expected}")
    return path


def _rows(path: Path, columns: int, title: str, *, skip: int = 0) -> list[list[str]]:
    """Whitespace-separated rows of ``path`` after ``skip`` header lines, each with ``columns`` fields."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if number <= skip or not line.strip():
            continue
        fields = line.split()
        if len(fields) != columns:
            raise DatasetLayoutError(
                f"{title}: {path.name} line {number} has {len(fields)} fields, expected {columns}: {line!r}"
            )
        rows.append(fields)
    if not rows:
        raise DatasetLayoutError(f"{title}: {path.name} lists no images")
    return rows


def _as_int(text: str, path: Path, title: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DatasetLayoutError(f"{title}: {path.name} holds {text!r} where an integer id belongs") from None


def _check_images_exist(paths: Sequence[Path], title: str) -> None:
    missing = [p for p in paths if not p.is_file()]
    if missing:
        shown = ", ".join(str(p) for p in missing[:3])
        raise DatasetLayoutError(f"{title}: {len(missing)} of {len(paths)} listed images are missing, e.g. {shown}; restore them, or remove their lines from the listing")


def split_by_class_rank(
    records: ImageRecords, n_train: int, title: str, *, key: str = "retrieval.data.train_classes", expected_total: int | None = None
) -> tuple[ImageRecords, ...]:
    """First ``n_train`` classes (sorted ids) train, the rest test; ``key`` is the parameter that sets ``n_train``."""
    classes = records.classes
    if not 1 <= n_train < len(classes):
        raise DatasetLayoutError(
            f"{title}: {len(classes)} classes found; {key} is {n_train}, it must leave at least one class to train "
            f"and one to test (1 to {len(classes) - 1})"
        )
    if expected_total is not None and len(classes) != expected_total:
        logger.warning("%s: %d classes found, the standard dataset has %d", title, len(classes), expected_total)
    is_train = np.isin(records.labels, classes[:n_train])
    return records.subset(is_train), records.subset(~is_train)


# --- the layouts -----------------------------------------------------------------------

_CUB = "CUB-200-2011"
_CUB_FILES = "images.txt, image_class_labels.txt and images/"


CUB_TRAIN_CLASSES, CARS_TRAIN_CLASSES = 100, 98  # the protocol's zero-shot splits


@register_reader("cub", ks=(1, 2, 4, 8), class_split=True, protocol_keeps_copies=True)
def _read_cub(root: Path | None, train_classes: int | None) -> RetrievalSplits:
    root = require_folder(root, _CUB, _CUB_FILES)
    images_txt = _require_file(root / "images.txt", _CUB, _CUB_FILES)
    labels_txt = _require_file(root / "image_class_labels.txt", _CUB, _CUB_FILES)
    if not (root / "images").is_dir():
        raise DatasetLayoutError(f"{_CUB}: images/ not found in {root}; the folder must contain {_CUB_FILES}")
    paths = {_as_int(i, images_txt, _CUB): p for i, p in _rows(images_txt, 2, _CUB)}
    labels = {_as_int(i, labels_txt, _CUB): _as_int(c, labels_txt, _CUB) for i, c in _rows(labels_txt, 2, _CUB)}
    if set(paths) != set(labels):
        raise DatasetLayoutError(f"{_CUB}: images.txt and image_class_labels.txt list different image ids")
    ids = sorted(paths)
    records = ImageRecords(labels=np.array([labels[i] for i in ids]), paths=[root / "images" / paths[i] for i in ids])
    _check_images_exist(records.paths, _CUB)
    train, test = split_by_class_rank(records, CUB_TRAIN_CLASSES if train_classes is None else train_classes, _CUB, expected_total=200)
    return RetrievalSplits(name="cub", train=train, test=test, ks=())


_CARS = "Cars-196"
_CARS_FILES = "cars_annos.mat (struct array 'annotations' with fields relative_im_path and class) and car_ims/"


@register_reader("cars", ks=(1, 4, 16), class_split=True, protocol_keeps_copies=True)
def _read_cars(root: Path | None, train_classes: int | None) -> RetrievalSplits:
    from scipy.io import loadmat

    root = require_folder(root, _CARS, _CARS_FILES)
    annotations_file = _require_file(root / "cars_annos.mat", _CARS, _CARS_FILES)
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
    _check_images_exist(records.paths, _CARS)
    train, test = split_by_class_rank(records, CARS_TRAIN_CLASSES if train_classes is None else train_classes, _CARS, expected_total=196)
    return RetrievalSplits(name="cars", train=train, test=test, ks=())


_SOP = "Stanford Online Products"
_SOP_FILES = "Ebay_train.txt and Ebay_test.txt (columns image_id class_id super_class_id path) and the image folders"
_SOP_HEADER = ["image_id", "class_id", "super_class_id", "path"]


@register_reader("sop", ks=(1, 10, 100), protocol_keeps_copies=True)
def _read_sop(root: Path | None) -> RetrievalSplits:
    root = require_folder(root, _SOP, _SOP_FILES)
    parts = []
    for name in ("Ebay_train.txt", "Ebay_test.txt"):
        listing = _require_file(root / name, _SOP, _SOP_FILES)
        header = listing.read_text().splitlines()[:1]
        if [h.lower() for h in (header[0].split() if header else [])] != _SOP_HEADER:
            raise DatasetLayoutError(f"{_SOP}: {name} must start with the header line {' '.join(_SOP_HEADER)}")
        rows = _rows(listing, 4, _SOP, skip=1)
        labels = np.array([_as_int(row[1], listing, _SOP) for row in rows])
        parts.append(ImageRecords(labels=labels, paths=[root / row[3] for row in rows]))
    train, test = parts
    if np.intersect1d(train.classes, test.classes).size:
        raise DatasetLayoutError(f"{_SOP}: Ebay_train.txt and Ebay_test.txt share classes; the split must be zero-shot")
    for part in parts:
        _check_images_exist(part.paths, _SOP)
    return RetrievalSplits(name="sop", train=train, test=test, ks=())


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
    rows = _rows(listing, 3, _INSHOP, skip=2)
    if _as_int(lines[0].strip(), listing, _INSHOP) != len(rows):
        raise DatasetLayoutError(f"{_INSHOP}: {listing.name} announces {lines[0].strip()} images but lists {len(rows)}")
    unknown = sorted({row[2] for row in rows} - set(_INSHOP_STATUSES))
    if unknown:
        raise DatasetLayoutError(f"{_INSHOP}: unknown evaluation_status {unknown}; expected train, query or gallery")
    image_root = next((base for base in (root, root / "Img") if (base / rows[0][0]).is_file()), root)
    labels = np.array([_item_number(row[1], listing) for row in rows])
    statuses = np.array([row[2] for row in rows])
    records = ImageRecords(labels=labels, paths=[image_root / row[0] for row in rows])
    _check_images_exist(records.paths, _INSHOP)
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


@register_reader("digits", ks=(1, 2, 4, 8))
def _read_digits(root: Path | None) -> RetrievalSplits:
    """scikit-learn's handwritten digits (grey 0..16) as uint8 0..255; digits 0-4 train, 5-9 test."""
    from sklearn.datasets import load_digits

    if root is not None:
        logger.warning("digits ships with scikit-learn; the folder %s is not read", root)
    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    records = ImageRecords(labels=digits.target, images=images)
    is_train = records.labels <= 4
    return RetrievalSplits(name="digits", train=records.subset(is_train), test=records.subset(~is_train), ks=())
