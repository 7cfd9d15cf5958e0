"""Fashion-MNIST from Debian's dataset-fashion-mnist: the original IDX files, its own split, a named error when absent."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from fdsml.data import DatasetLayoutError
from fdsml.data.classification_datasets import read_classification_dataset
from fdsml.data.readers.fashion_mnist import FASHION_MNIST_ROOT, read_idx
from tests.dependencies import require_file

INSTALLED = FASHION_MNIST_ROOT / "t10k-labels-idx1-ubyte.gz"
INSTALL_HINT = f"Fashion-MNIST is not installed in {FASHION_MNIST_ROOT}: apt-get install dataset-fashion-mnist"


def _write_idx(path, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as stream:
        stream.write(header + array.astype(np.uint8).tobytes())


def test_idx_files_read_to_their_declared_shape_and_truncation_is_named(tmp_path):
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    _write_idx(tmp_path / "a.gz", array)
    assert np.array_equal(read_idx(tmp_path / "a.gz"), array)
    (tmp_path / "b.gz").write_bytes(gzip.compress(gzip.decompress((tmp_path / "a.gz").read_bytes())[:-1]))
    with pytest.raises(DatasetLayoutError, match="truncated"):
        read_idx(tmp_path / "b.gz")


def test_a_missing_folder_names_the_debian_package(tmp_path):
    with pytest.raises(DatasetLayoutError, match="apt-get install dataset-fashion-mnist"):
        read_classification_dataset("fashion_mnist", tmp_path)


def test_the_installed_dataset_has_its_published_split():
    require_file(INSTALLED, INSTALL_HINT)
    splits = read_classification_dataset("fashion_mnist")
    assert splits.train.images.shape == (60000, 28, 28) and splits.test.images.shape == (10000, 28, 28)
    assert np.bincount(splits.train.labels).tolist() == [6000] * 10
    assert np.bincount(splits.test.labels).tolist() == [1000] * 10
    assert splits.num_classes == 10 and splits.class_names[9] == "Ankle boot"


def test_robustness_corrupts_its_test_images_at_the_classifiers_view():
    require_file(INSTALLED, INSTALL_HINT)
    from fdsml.evaluation.corruptions import clean_test_images, corrupt_images

    test = read_classification_dataset("fashion_mnist").test
    clean = clean_test_images(test, 32, 1.0, max_images=4, seed=0)
    assert clean.images.shape == (4, 32, 32, 3) and set(clean.labels) <= set(range(10))
    corrupted = corrupt_images(clean.images, "gaussian_noise", 3, seed=0)
    assert corrupted.shape == (4, 32, 32, 3) and not np.array_equal(corrupted, clean.images)
