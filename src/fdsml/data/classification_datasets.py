"""The registry of the classification benchmarks' readers (docs/method.md §5.3), and what they share.

Each layout is one small reader ``reader(root, seed) -> ClassificationSplits`` registered by name with
:func:`register_classification_reader`, one module each in :mod:`fdsml.data.readers` (CIFAR, Stanford
Cars, Flowers-102, the ImageFolder benchmarks, Fashion-MNIST, the embedded ``digits``, your own
``imagefolder`` and ``csv``) or in your own package (entry points of group ``fdsml.datasets``,
docs/plugins.md): the registry finds them itself (:mod:`fdsml.plugins`).

Labels are 0..C-1 in every layout. A missing folder raises :class:`DatasetLayoutError`
naming the layout it expects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdsml import plugins
from fdsml.data.layout import DatasetLayoutError
from fdsml.data.retrieval_datasets import READERS_PACKAGE, ENTRY_POINTS, ImageRecords

logger = logging.getLogger(__name__)

DIGITS_TEST_FRACTION = 0.2
"""The test share of a split drawn per class from the seed (``digits``, your own data without a given split)."""


@dataclass(frozen=True, eq=False)
class ClassificationSplits:
    """A dataset's training and test images, labels 0..``num_classes``-1 (``class_names`` in label order, when known)."""

    name: str
    train: ImageRecords
    test: ImageRecords
    num_classes: int
    class_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for part in ("train", "test"):
            labels = getattr(self, part).labels
            if len(labels) and (labels.min() < 0 or labels.max() >= self.num_classes):
                raise ValueError(
                    f"{self.name}: {part} labels must lie in [0, {self.num_classes}), got [{labels.min()}, {labels.max()}]"
                )
        if self.class_names and len(self.class_names) != self.num_classes:
            raise ValueError(f"{self.name}: {len(self.class_names)} class names for {self.num_classes} classes")


ClassificationReader = Callable[[Path | None, int], ClassificationSplits]
_READERS: dict[str, ClassificationReader] = {}
_KEEP_COPIES: set[str] = set()


def register_classification_reader(name: str, *, protocol_keeps_copies: bool = False) -> Callable[[ClassificationReader], ClassificationReader]:
    """Register ``reader(root, seed) -> ClassificationSplits`` under ``name``. ``protocol_keeps_copies``: a standard
    benchmark scored on its files as shipped, so pixel-identical copies are counted and kept, not refused."""

    def decorate(reader: ClassificationReader) -> ClassificationReader:
        if name in _READERS:
            raise ValueError(f"a classification dataset reader named {name!r} is already registered")
        _READERS[name] = reader
        if protocol_keeps_copies:
            _KEEP_COPIES.add(name)
        return reader

    return decorate


def _readers() -> dict[str, ClassificationReader]:
    plugins.discover(READERS_PACKAGE, ENTRY_POINTS)
    return _READERS


def classification_keeps_copies(name: str) -> bool:
    """Whether classification dataset ``name`` is a benchmark scored on its files as shipped, copies and all."""
    _readers()
    return name in _KEEP_COPIES


def available_classification_datasets() -> list[str]:
    return sorted(_readers())


def classification_reader_module(name: str) -> str:
    """The module of dataset ``name``'s reader (the code a run reading it executes, :mod:`fdsml.plugins`)."""
    return _reader(name).__module__


def read_classification_dataset(name: str, root: str | Path | None = None, *, seed: int = 0) -> ClassificationSplits:
    """Read dataset ``name`` from folder ``root`` (``digits`` needs none); ``seed`` fixes a random split where one is drawn."""
    splits = _reader(name)(None if root is None else Path(root).expanduser(), seed)
    logger.info("dataset %s: %d train, %d test, %d classes", name, len(splits.train), len(splits.test), splits.num_classes)
    return splits


def _reader(name: str) -> ClassificationReader:
    if name not in _readers():
        raise KeyError(f"unknown classification dataset {name!r}; available: {', '.join(available_classification_datasets())}")
    return _READERS[name]


def open_torchvision(factory: Callable[..., Any], root: Path, title: str, expected: str, **kwargs: Any) -> Any:
    """A torchvision dataset on a local folder; its 'not found or corrupted' error becomes one naming our layout."""
    try:
        return factory(root=str(root), download=False, **kwargs)
    except RuntimeError as error:
        raise DatasetLayoutError(f"{title}: cannot read {root} ({error}); it must contain {expected}") from error


def torchvision_private(dataset: Any, attribute: str) -> Any:
    """A file list torchvision keeps private (it offers no public one); fails clearly if torchvision renamed it."""
    if not hasattr(dataset, attribute):
        raise RuntimeError(f"torchvision's {type(dataset).__name__} has no {attribute!r}: this reader needs updating")
    return getattr(dataset, attribute)
