"""``fashion_mnist``: the original gzipped IDX files (``train-images-idx3-ubyte.gz`` ...), by default where Debian's
``dataset-fashion-mnist`` installs them (:data:`FASHION_MNIST_ROOT`); 60,000 training and 10,000 test images,
28 x 28 grey, 10 classes."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from fdsml.data.classification_datasets import ClassificationSplits, register_classification_reader
from fdsml.data.layout import DatasetLayoutError
from fdsml.data.retrieval_datasets import ImageRecords

FASHION_MNIST_ROOT = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
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
