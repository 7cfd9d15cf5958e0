"""The registry of the retrieval datasets' readers, with their zero-shot splits, and the records they return.

Each layout is one small reader registered by name with :func:`register_reader`, one module each in
:mod:`fdsml.data.readers` (``cub``, ``cars``, ``sop``, ``inshop``, the embedded ``omniglot`` and
``digits``, your own ``imagefolder`` and ``csv``) or in your own package (entry points of group
``fdsml.datasets``, docs/plugins.md): the registry finds them itself (:mod:`fdsml.plugins`);
:func:`read_retrieval_dataset` looks one up. Training and test classes are disjoint, as the retrieval
protocol requires.

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

from fdsml import plugins
from fdsml.data.layout import DatasetLayoutError

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
READERS_PACKAGE = "fdsml.data.readers"
ENTRY_POINTS = "fdsml.datasets"
"""Where the readers of both registries (retrieval's here, classification's) are found."""


def _layouts() -> dict[str, _Layout]:
    plugins.discover(READERS_PACKAGE, ENTRY_POINTS)
    return _LAYOUTS


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
    return sorted(_layouts())


def reader_module(name: str) -> str:
    """The module of dataset ``name``'s reader (the code a run reading it executes, :mod:`fdsml.plugins`)."""
    return _layout(name).read.__module__


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
    if name not in _layouts():
        raise KeyError(f"unknown retrieval dataset {name!r}; available: {', '.join(available_datasets())}")
    return _LAYOUTS[name]


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
