"""Images identical by content where they inflate a score are found before work: a copy among the scored images or
of a training image stops the run naming the files and the fix; a benchmark scored as shipped says how many."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from fdsml.data import DatasetLayoutError, ImageRecords, read_retrieval_dataset
from fdsml.data.leaks import check_no_leaks, image_digests, leaked_copies

from ..own_images import write_png


@pytest.fixture(autouse=True)
def decode_cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _files(folder, count, seed=0):
    rng = np.random.default_rng(seed)
    return [write_png(folder / f"{index}.png", index, rng) for index in range(count)]


def test_copies_are_grouped_only_where_an_image_is_scored():
    digests = {"train": ["a", "b", "b", "c"], "test": ["c", "d", "e", "d"]}
    assert leaked_copies(digests, scored=("test",)) == [[("train", 3), ("test", 0)], [("test", 1), ("test", 3)]]
    assert leaked_copies({"train": ["a", "a"], "test": ["b"]}, scored=("test",)) == []  # weighed twice, leaks nothing


def test_a_copy_under_another_name_or_in_another_format_stops_the_run_naming_both_files(tmp_path):
    train, test = _files(tmp_path / "train", 3), _files(tmp_path / "test", 3, seed=1)
    parts = {"train": ImageRecords(labels=np.arange(3), paths=train), "test": ImageRecords(labels=np.arange(3), paths=test)}
    check_no_leaks("mine", parts, ("test",))  # all different: nothing said
    Image.open(test[0]).save(tmp_path / "test" / "0 again.bmp")
    Image.open(train[2]).save(tmp_path / "test" / "from training.png")
    with_copies = [*test, tmp_path / "test" / "0 again.bmp", tmp_path / "test" / "from training.png"]
    parts["test"] = ImageRecords(labels=np.arange(5), paths=with_copies)
    with pytest.raises(
        DatasetLayoutError,
        match=r"^mine: pixel-identical copies among the scored images or of a training image \(2: train train/2.png = test "
        r"test/from training.png; test test/0.png = test test/0 again.bmp\); a query finds its copy at distance 0 .*: delete the copies",
    ):
        check_no_leaks("mine", parts, ("test",))


def test_a_benchmark_scored_as_shipped_keeps_its_copies_and_says_how_many(caplog):
    images = np.zeros((4, 3, 3), dtype=np.uint8)
    images[1] += 1
    parts = {"train": ImageRecords(labels=np.array([0]), images=images[:1]), "test": ImageRecords(labels=np.arange(3), images=images[1:])}
    with caplog.at_level("WARNING", logger="fdsml.data.leaks"):
        check_no_leaks("cub", parts, ("test",), protocol_keeps=True)
    assert (
        "cub: pixel-identical copies among the scored images or of a training image (2: train image 0 = test image 1 = "
        "test image 2); kept: its protocol scores the files as shipped"
    ) in caplog.text
    with pytest.raises(DatasetLayoutError, match=r"train image 0 = test image 1 = test image 2"):
        check_no_leaks("mine", parts, ("test",))


def test_omniglot_as_shipped_has_no_copy_once_its_two_sets_shared_alphabets_are_counted_once(caplog):
    with caplog.at_level("DEBUG", logger="fdsml.data.readers.omniglot"):
        splits = read_retrieval_dataset("omniglot")
    assert "Omniglot: 1000 images (Greek, Latin) are in both background sets as shipped: each counted once" in caplog.text
    digests = image_digests({"train": splits.train, "test": splits.test}, "omniglot")
    assert leaked_copies(digests, scored=("test",)) == []
    assert len(set(digests["train"]) | set(digests["test"])) == len(splits.train) + len(splits.test) == 4840
