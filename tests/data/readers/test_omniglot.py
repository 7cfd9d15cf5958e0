"""The embedded Omniglot retrieval datasets: the union counted once, split by alphabet, white on black, checked files."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from fdsml.data import DatasetLayoutError, read_retrieval_dataset, recommended_ks
from fdsml.data.readers.omniglot import EMBEDDED_ROOT, TEST_ALPHABETS, TRAIN_ALPHABETS, VALIDATION_ALPHABET, read_omniglot_images


@pytest.fixture(scope="module")
def union():
    return read_omniglot_images()


def _alphabets(records, alphabets) -> set[str]:
    return set(np.asarray(alphabets)[records.labels])


def test_the_union_counts_greek_and_latin_once(union):
    images, labels, alphabets = union
    assert images.shape == (4840, 105, 105) and images.dtype == np.uint8
    assert len(alphabets) == 242 and np.bincount(labels).tolist() == [20] * 242
    assert {a: alphabets.count(a) for a in ("Greek", "Latin")} == {"Greek": 24, "Latin": 26}


def test_training_and_test_alphabets_are_as_specified_and_disjoint(union):
    splits = read_retrieval_dataset("omniglot")
    alphabets = union[2]
    assert (len(splits.train), len(splits.train.classes)) == (2720, 136)
    assert (len(splits.test), len(splits.test.classes)) == (2120, 106)
    assert _alphabets(splits.train, alphabets) == set(TRAIN_ALPHABETS)
    assert _alphabets(splits.test, alphabets) == set(TEST_ALPHABETS)
    assert not set(splits.train.classes) & set(splits.test.classes)
    assert recommended_ks("omniglot") == (1, 2, 4, 8)


def test_validation_holds_one_training_alphabet_out_and_never_sees_a_test_alphabet(union):
    splits = read_retrieval_dataset("omniglot_validation")
    alphabets = union[2]
    assert _alphabets(splits.test, alphabets) == {VALIDATION_ALPHABET}
    assert _alphabets(splits.train, alphabets) == set(TRAIN_ALPHABETS) - {VALIDATION_ALPHABET}
    assert (len(splits.test), len(splits.test.classes)) == (440, 22)
    assert len(splits.train) + len(splits.test) == 2720


def test_images_are_white_strokes_on_black(union):
    images = union[0]
    assert (images[:, 0, 0] == 0).all()  # the corners are background
    ink = (images > 127).mean()
    assert 0.01 < ink < 0.2 and set(np.unique(images)) <= {0, 255}


def test_a_users_copy_reads_the_same_and_a_damaged_or_missing_zip_is_named(tmp_path, union):
    copy = tmp_path / "omniglot"
    shutil.copytree(EMBEDDED_ROOT, copy)
    images, labels, alphabets = read_omniglot_images(copy)
    assert np.array_equal(images, union[0]) and np.array_equal(labels, union[1]) and alphabets == union[2]
    damaged = copy / "images_background_small2.zip"
    damaged.write_bytes(damaged.read_bytes()[:-10])
    with pytest.raises(DatasetLayoutError, match="images_background_small2.zip does not match its published sha256"):
        read_retrieval_dataset("omniglot", copy)
    damaged.unlink()
    with pytest.raises(DatasetLayoutError, match="images_background_small2.zip not found"):
        read_retrieval_dataset("omniglot", copy)
