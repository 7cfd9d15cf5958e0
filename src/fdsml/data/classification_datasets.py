"""Readers for the classification benchmarks' layouts (docs/method.md §5.3), registered by name.

Each layout is one small reader ``reader(root, seed) -> ClassificationSplits``:

* ``cifar10`` / ``cifar100``: torchvision's classes on ``root/cifar-10-batches-py`` /
  ``root/cifar-100-python`` (the "python version" archives, unpacked), never downloading.
* ``stanford_cars``: torchvision's ``StanfordCars`` on ``root/stanford_cars`` (196 classes,
  its own train / test halves).
* ``flowers102``: torchvision's ``Flowers102`` on ``root/flowers-102``; train and val together
  train (2,040 images), test tests (6,149), as usual when fine-tuning.
* ``imagenet1k``, ``imagenet100``, ``places30``: ``root/train/<class>/*`` and ``root/val/<class>/*``
  (torchvision's ``ImageFolder``); the two splits must name the same classes.
* ``fashion_mnist``: the original gzipped IDX files (``train-images-idx3-ubyte.gz`` ...), by default
  where Debian's ``dataset-fashion-mnist`` installs them (:data:`FASHION_MNIST_ROOT`); 60,000
  training and 10,000 test images, 28 x 28 grey, 10 classes.
* ``digits`` (embedded, offline): scikit-learn's 1,797 real 8 x 8 handwritten digits, split
  80 / 20 per class, reproducibly from ``seed``.

Labels are 0..C-1 in every layout. A missing folder raises :class:`DatasetLayoutError`
naming the layout it expects.
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fdsml.data.layout import DatasetLayoutError, require_folder
from fdsml.data.retrieval_datasets import ImageRecords

logger = logging.getLogger(__name__)

DIGITS_TEST_FRACTION = 0.2
FASHION_MNIST_ROOT = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


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


def classification_keeps_copies(name: str) -> bool:
    """Whether classification dataset ``name`` is a benchmark scored on its files as shipped, copies and all."""
    return name in _KEEP_COPIES


def available_classification_datasets() -> list[str]:
    return sorted(_READERS)


def read_classification_dataset(name: str, root: str | Path | None = None, *, seed: int = 0) -> ClassificationSplits:
    """Read dataset ``name`` from folder ``root`` (``digits`` needs none); ``seed`` fixes a random split where one is drawn."""
    if name not in _READERS:
        raise KeyError(f"unknown classification dataset {name!r}; available: {', '.join(available_classification_datasets())}")
    splits = _READERS[name](None if root is None else Path(root).expanduser(), seed)
    logger.info("dataset %s: %d train, %d test, %d classes", name, len(splits.train), len(splits.test), splits.num_classes)
    return splits


def _open_torchvision(factory: Callable[..., Any], root: Path, title: str, expected: str, **kwargs: Any) -> Any:
    """A torchvision dataset on a local folder; its 'not found or corrupted' error becomes one naming our layout."""
    try:
        return factory(root=str(root), download=False, **kwargs)
    except RuntimeError as error:
        raise DatasetLayoutError(f"{title}: cannot read {root} ({error}); it must contain {expected}") from error


def _private(dataset: Any, attribute: str) -> Any:
    """A file list torchvision keeps private (it offers no public one); fails clearly if torchvision renamed it."""
    if not hasattr(dataset, attribute):
        raise RuntimeError(f"torchvision's {type(dataset).__name__} has no {attribute!r}: this reader needs updating")
    return getattr(dataset, attribute)


# --- CIFAR ----------------------------------------------------------------------------


def _cifar(root: Path | None, factory_name: str, title: str, expected: str, num_classes: int, name: str) -> ClassificationSplits:
    import torchvision.datasets as tvd

    root = require_folder(root, title, expected)
    factory = getattr(tvd, factory_name)
    parts = [_open_torchvision(factory, root, title, expected, train=train) for train in (True, False)]
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


# --- Stanford Cars, Flowers-102 --------------------------------------------------------

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
        dataset = _open_torchvision(StanfordCars, root, _CARS, _CARS_FILES, split=split)
        samples, names = _private(dataset, "_samples"), tuple(dataset.classes)
        parts.append(ImageRecords(labels=np.array([label for _, label in samples]), paths=[path for path, _ in samples]))
    return ClassificationSplits("stanford_cars", parts[0], parts[1], len(names), names)


_FLOWERS = "Flowers-102"
_FLOWERS_FILES = "flowers-102/ with jpg/, imagelabels.mat and setid.mat"


@register_classification_reader("flowers102", protocol_keeps_copies=True)
def _read_flowers102(root: Path | None, seed: int) -> ClassificationSplits:
    from torchvision.datasets import Flowers102

    root = require_folder(root, _FLOWERS, _FLOWERS_FILES)
    records = {}
    for split in ("train", "val", "test"):
        dataset = _open_torchvision(Flowers102, root, _FLOWERS, _FLOWERS_FILES, split=split)
        records[split] = (_private(dataset, "_labels"), _private(dataset, "_image_files"))
    train_labels = [*records["train"][0], *records["val"][0]]
    train_paths = [*records["train"][1], *records["val"][1]]
    train = ImageRecords(labels=np.array(train_labels), paths=train_paths)
    test = ImageRecords(labels=np.array(records["test"][0]), paths=records["test"][1])
    return ClassificationSplits("flowers102", train, test, 102)


# --- ImageFolder layouts -----------------------------------------------------------------


def _image_folder(root: Path | None, title: str, name: str) -> ClassificationSplits:
    from torchvision.datasets import ImageFolder

    expected = "train/<class>/<images> and val/<class>/<images> (one sub-folder per class, the same classes in both)"
    root = require_folder(root, title, expected)
    parts = []
    for split in ("train", "val"):
        folder = root / split
        if not folder.is_dir():
            raise DatasetLayoutError(f"{title}: {folder} not found; the folder must contain {expected}")
        try:
            dataset = ImageFolder(str(folder))
        except FileNotFoundError as error:
            raise DatasetLayoutError(f"{title}: {error}; the folder must contain {expected}") from error
        parts.append(dataset)
    train, val = parts
    if train.classes != val.classes:
        only = sorted(set(train.classes) ^ set(val.classes))
        raise DatasetLayoutError(f"{title}: train/ and val/ name different classes (e.g. {only[:3]}); {expected}")
    records = [ImageRecords(labels=np.array(p.targets), paths=[path for path, _ in p.samples]) for p in parts]
    return ClassificationSplits(name, records[0], records[1], len(train.classes), tuple(train.classes))


@register_classification_reader("imagenet1k", protocol_keeps_copies=True)
def _read_imagenet1k(root: Path | None, seed: int) -> ClassificationSplits:
    return _image_folder(root, "ImageNet-1k", "imagenet1k")


@register_classification_reader("imagenet100", protocol_keeps_copies=True)
def _read_imagenet100(root: Path | None, seed: int) -> ClassificationSplits:
    return _image_folder(root, "ImageNet-100", "imagenet100")


@register_classification_reader("places30", protocol_keeps_copies=True)
def _read_places30(root: Path | None, seed: int) -> ClassificationSplits:
    return _image_folder(root, "Places-30", "places30")


# --- Fashion-MNIST ------------------------------------------------------------------------------

_FASHION_FILES = "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz"


def read_idx(path: Path) -> np.ndarray:
    """A gzipped IDX file of unsigned bytes (MNIST's format) as a uint8 array of its declared shape."""
    with gzip.open(path, "rb") as stream:
        data = stream.read()
    if len(data) < 4 or data[:3] != b"\x00\x00\x08":
        raise DatasetLayoutError(f"{path}: not an IDX file of unsigned bytes; replace it with the original file")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    values = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if values.size != int(np.prod(shape)):
        raise DatasetLayoutError(f"{path}: holds {values.size} values for shape {shape}; it is truncated, replace it")
    return values.reshape(shape)


@register_classification_reader("fashion_mnist", protocol_keeps_copies=True)
def _read_fashion_mnist(root: Path | None, seed: int) -> ClassificationSplits:
    """Fashion-MNIST's own train / test split, from ``root`` or :data:`FASHION_MNIST_ROOT` (Debian's package)."""
    root = FASHION_MNIST_ROOT if root is None else root
    if not all((root / name).is_file() for name in _FASHION_FILES.split(", ")):
        raise DatasetLayoutError(
            f"Fashion-MNIST: {root} does not hold {_FASHION_FILES}; install them with "
            "`apt-get install dataset-fashion-mnist` (Debian, Ubuntu) or set the dataset's root to a folder holding them"
        )
    parts = [
        ImageRecords(labels=read_idx(root / f"{part}-labels-idx1-ubyte.gz").astype(np.int64), images=read_idx(root / f"{part}-images-idx3-ubyte.gz"))
        for part in ("train", "t10k")
    ]
    return ClassificationSplits("fashion_mnist", parts[0], parts[1], len(FASHION_MNIST_CLASSES), FASHION_MNIST_CLASSES)


# --- the embedded default --------------------------------------------------------------------


@register_classification_reader("digits")
def _read_digits(root: Path | None, seed: int) -> ClassificationSplits:
    """scikit-learn's digits (grey 0..16 -> uint8 0..255), a stratified 80 / 20 split drawn from ``seed``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if root is not None:
        logger.warning("digits ships with scikit-learn; the folder %s is not read", root)
    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    records = ImageRecords(labels=digits.target, images=images)
    train, test = train_test_split(
        np.arange(len(records)), test_size=DIGITS_TEST_FRACTION, stratify=records.labels, random_state=seed
    )
    names = tuple(str(d) for d in range(10))
    return ClassificationSplits("digits", records.subset(np.sort(train)), records.subset(np.sort(test)), 10, names)
