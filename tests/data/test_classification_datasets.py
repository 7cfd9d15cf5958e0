"""Classification readers: the embedded digits split, a tiny ImageFolder layout, and clear errors for missing folders."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_digits

from fdsml.data import DatasetLayoutError
from fdsml.data.classification_datasets import available_classification_datasets, read_classification_dataset, torchvision_private

# what each file-based reader's message must name, so a user knows what to put in the folder
EXPECTED_LAYOUT = {
    "cifar10": "cifar-10-batches-py/",
    "cifar100": "cifar-100-python/",
    "stanford_cars": "stanford_cars/ with devkit/",
    "flowers102": "flowers-102/ with jpg/",
    "imagenet1k": "train/<class>/<images> and val/<class>/<images>",
    "imagenet100": "train/<class>/<images> and val/<class>/<images>",
    "places30": "train/<class>/<images> and val/<class>/<images>",
}


def test_every_benchmark_of_the_method_has_a_reader():
    # fashion_mnist: tests/data/readers/test_fashion_mnist.py; your own imagefolder and csv: tests/data/readers/test_own_data.py
    assert set(available_classification_datasets()) >= {*EXPECTED_LAYOUT, "digits", "fashion_mnist", "imagefolder", "csv"}


@pytest.mark.parametrize("name", available_classification_datasets())
def test_every_reader_without_a_folder_reads_offline_or_asks_for_its_folder(name):
    """Every registered reader (a new one too): splits with labels 0..C-1 in both parts, or one line naming what to give."""
    try:
        splits = read_classification_dataset(name, seed=0)
    except DatasetLayoutError as error:
        assert str(error) and "\n" not in str(error)
        return
    assert len(splits.train) and len(splits.test) and splits.num_classes >= 2
    assert set(np.unique(splits.train.labels)) <= set(range(splits.num_classes))


@pytest.mark.parametrize("name", sorted(EXPECTED_LAYOUT))
def test_a_missing_folder_names_the_expected_layout(name, tmp_path):
    missing = tmp_path / "nowhere"
    expected = re.escape(EXPECTED_LAYOUT[name])
    with pytest.raises(DatasetLayoutError, match=f"{re.escape(str(missing))}.*not found.*{expected}"):
        read_classification_dataset(name, missing)
    with pytest.raises(DatasetLayoutError, match="give the dataset folder"):
        read_classification_dataset(name, None)


@pytest.mark.parametrize("name", ["cifar10", "stanford_cars", "flowers102"])
def test_an_empty_folder_is_refused_by_torchvision_with_our_layout_named(name, tmp_path):
    with pytest.raises(DatasetLayoutError, match=f"cannot read {re.escape(str(tmp_path))}.*must contain {re.escape(EXPECTED_LAYOUT[name])}"):
        read_classification_dataset(name, tmp_path)


def write_image(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((6, 6, 3), value, np.uint8)).save(path)


def test_image_folder_layout_numbers_classes_in_sorted_order(tmp_path):
    for split, count in (("train", 3), ("val", 1)):
        for value, name in enumerate(("n02", "n01")):
            for k in range(count):
                write_image(tmp_path / split / name / f"{k}.png", value)
    splits = read_classification_dataset("imagenet100", tmp_path)
    assert splits.num_classes == 2 and splits.class_names == ("n01", "n02")
    assert len(splits.train) == 6 and len(splits.test) == 2
    assert all(path.parent.name == splits.class_names[label] for path, label in zip(splits.train.paths, splits.train.labels))


def test_image_folder_splits_must_share_their_classes(tmp_path):
    write_image(tmp_path / "train" / "a" / "0.png", 0)
    write_image(tmp_path / "val" / "b" / "0.png", 0)
    with pytest.raises(DatasetLayoutError, match="train/ and val/ name different classes"):
        read_classification_dataset("places30", tmp_path)
    (tmp_path / "val" / "b" / "0.png").unlink()
    (tmp_path / "val" / "b").rmdir()
    with pytest.raises(DatasetLayoutError, match="Couldn't find any class folder"):
        read_classification_dataset("places30", tmp_path)


def test_digits_are_split_80_20_in_every_class_reproducibly_by_seed():
    splits = read_classification_dataset("digits")
    assert splits.num_classes == 10 and len(splits.train) + len(splits.test) == 1797
    assert splits.train.images.dtype == np.uint8 and splits.train.images.max() == 255
    for label in range(10):
        train, test = (np.sum(part.labels == label) for part in (splits.train, splits.test))
        assert abs(test / (train + test) - 0.2) < 0.01
    again = read_classification_dataset("digits", seed=0)
    other = read_classification_dataset("digits", seed=1)
    assert np.array_equal(splits.test.images, again.test.images)
    assert not np.array_equal(splits.test.images, other.test.images)
    # the halves partition the dataset: together they hold each (image, label) exactly as often as it has
    digits = load_digits()
    original = np.column_stack([np.round(digits.images * 255 / 16).reshape(1797, -1), digits.target])
    images = np.concatenate([splits.train.images, splits.test.images]).reshape(1797, -1)
    halves = np.column_stack([images, np.concatenate([splits.train.labels, splits.test.labels])])
    assert np.array_equal(np.unique(original, axis=0, return_counts=True)[1], np.unique(halves, axis=0, return_counts=True)[1])
    assert np.array_equal(np.unique(original, axis=0), np.unique(halves, axis=0))


def test_an_unknown_dataset_lists_the_known_ones():
    with pytest.raises(KeyError, match="available: cifar10, cifar100, csv, digits"):
        read_classification_dataset("mnist")


def test_a_file_list_torchvision_keeps_private_is_read_or_its_absence_named():
    class Listing:
        _image_files = ["a.png"]

    assert torchvision_private(Listing(), "_image_files") == ["a.png"]
    with pytest.raises(RuntimeError, match=r"^torchvision's Listing has no '_samples': this reader needs updating$"):
        torchvision_private(Listing(), "_samples")


def test_image_folder_splits_with_other_classes_name_those_classes_and_the_layout(tmp_path):
    for split, names in (("train", ("a", "b", "c")), ("val", ("a", "b", "d"))):
        for name in names:
            write_image(tmp_path / split / name / "0.png", 0)
    with pytest.raises(DatasetLayoutError) as refused:
        read_classification_dataset("places30", tmp_path)
    assert str(refused.value) == (
        "Places-30: train/ and val/ name different classes (e.g. ['c', 'd']); "
        "train/<class>/<images> and val/<class>/<images> (one sub-folder per class, the same classes in both)"
    )
    (tmp_path / "val" / "d").rename(tmp_path / "val" / "c")
    splits = read_classification_dataset("places30", tmp_path)
    assert splits.name == "places30" and splits.class_names == ("a", "b", "c")
