"""Dataset readers on tiny fake copies of each layout: zero-shot splits, and clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

from fdsml.data import (
    DatasetLayoutError,
    ImageRecords,
    RetrievalSplits,
    available_datasets,
    read_retrieval_dataset,
    recommended_ks,
    register_reader,
)
from fdsml.data import retrieval_datasets


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


def assert_zero_shot(splits: RetrievalSplits) -> None:
    evaluated = splits.test.classes if splits.test is not None else np.union1d(splits.query.classes, splits.gallery.classes)
    assert np.intersect1d(splits.train.classes, evaluated).size == 0
    for part in (splits.train, splits.test, splits.query, splits.gallery):
        if part is not None and part.paths is not None:  # or its images in memory
            assert all(p.is_file() for p in part.paths)


# --- CUB-200-2011 -------------------------------------------------------------------------


def fake_cub(root: Path, per_class: int = 2) -> None:
    """200 classes; image ids listed in shuffled order, as nothing guarantees file order."""
    rows = [(c, k) for c in range(1, 201) for k in range(per_class)]
    order = np.random.default_rng(0).permutation(len(rows))
    images, labels = [], []
    for image_id, row in enumerate(order, start=1):
        c, k = rows[row]
        relative = f"{c:03d}.Bird_{c}/Bird_{c}_{k}.jpg"
        touch(root / "images" / relative)
        images.append(f"{image_id} {relative}")
        labels.append(f"{image_id} {c}")
    (root / "images.txt").write_text("\n".join(images) + "\n")
    (root / "image_class_labels.txt").write_text("\n".join(labels) + "\n")


def test_cub_trains_on_the_first_100_classes(tmp_path):
    fake_cub(tmp_path)
    splits = read_retrieval_dataset("cub", tmp_path)
    assert splits.name == "cub" and splits.ks == (1, 2, 4, 8) and not splits.has_query_set
    np.testing.assert_array_equal(splits.train.classes, np.arange(1, 101))
    np.testing.assert_array_equal(splits.test.classes, np.arange(101, 201))
    assert len(splits.train) == len(splits.test) == 200
    assert_zero_shot(splits)
    # each path sits in its own class's folder
    for path, label in zip(splits.test.paths, splits.test.labels):
        assert path.parent.name.startswith(f"{label:03d}.")


def test_cub_errors_name_the_expected_files(tmp_path):
    with pytest.raises(DatasetLayoutError, match="images.txt, image_class_labels.txt and images/"):
        read_retrieval_dataset("cub", tmp_path / "nowhere")
    with pytest.raises(DatasetLayoutError, match="give the dataset folder"):
        read_retrieval_dataset("cub")
    fake_cub(tmp_path)
    (tmp_path / "image_class_labels.txt").unlink()
    with pytest.raises(DatasetLayoutError, match="image_class_labels.txt not found"):
        read_retrieval_dataset("cub", tmp_path)


def test_cub_malformed_lines_and_missing_images_are_reported(tmp_path):
    fake_cub(tmp_path)
    lines = (tmp_path / "image_class_labels.txt").read_text().splitlines()
    (tmp_path / "image_class_labels.txt").write_text("\n".join([lines[0] + " extra", *lines[1:]]))
    with pytest.raises(DatasetLayoutError, match="image_class_labels.txt line 1 has 3 fields, expected 2"):
        read_retrieval_dataset("cub", tmp_path)
    (tmp_path / "image_class_labels.txt").write_text("\n".join(lines))
    next((tmp_path / "images").rglob("*.jpg")).unlink()
    with pytest.raises(DatasetLayoutError, match="1 of 400 listed images are missing"):
        read_retrieval_dataset("cub", tmp_path)


# --- Cars-196 ------------------------------------------------------------------------------


def fake_cars(root: Path, per_class: int = 2) -> None:
    """cars_annos.mat as the official file lays it out: a 1 x N struct array 'annotations'."""
    fields = ["relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test"]
    n = 196 * per_class
    annotations = np.zeros((1, n), dtype=[(f, "O") for f in fields])
    rng = np.random.default_rng(1)
    for i in range(n):
        relative = f"car_ims/{i + 1:06d}.jpg"
        touch(root / relative)
        # the 'test' flag belongs to the classification split and must be ignored
        annotations[0, i] = (relative, 1, 2, 30, 40, np.uint8(i % 196 + 1), np.uint8(rng.integers(0, 2)))
    class_names = np.array([f"Make Model {c}" for c in range(196)], dtype=object)
    savemat(root / "cars_annos.mat", {"annotations": annotations, "class_names": class_names})


def test_cars_trains_on_the_first_98_classes_from_the_annotations_file(tmp_path):
    fake_cars(tmp_path)
    splits = read_retrieval_dataset("cars", tmp_path)
    assert splits.ks == (1, 4, 16)
    np.testing.assert_array_equal(splits.train.classes, np.arange(1, 99))
    np.testing.assert_array_equal(splits.test.classes, np.arange(99, 197))
    assert len(splits.train) == len(splits.test) == 196
    assert_zero_shot(splits)
    # image i carries class i % 196 + 1
    index = int(splits.test.paths[0].stem) - 1
    assert splits.test.labels[0] == index % 196 + 1


def test_cars_malformed_annotations_are_reported(tmp_path):
    with pytest.raises(DatasetLayoutError, match="cars_annos.mat"):
        read_retrieval_dataset("cars", tmp_path)
    (tmp_path / "cars_annos.mat").write_text("not a MATLAB file")
    with pytest.raises(DatasetLayoutError, match="cannot read"):
        read_retrieval_dataset("cars", tmp_path)
    savemat(tmp_path / "cars_annos.mat", {"labels": np.arange(3)})
    with pytest.raises(DatasetLayoutError, match="relative_im_path and class"):
        read_retrieval_dataset("cars", tmp_path)


# --- Stanford Online Products --------------------------------------------------------------


def fake_sop(root: Path, train_classes=range(1, 6), test_classes=range(6, 11)) -> None:
    image_id = 0
    for name, classes in (("Ebay_train.txt", train_classes), ("Ebay_test.txt", test_classes)):
        lines = ["image_id class_id super_class_id path"]
        for c in classes:
            for k in range(3):
                image_id += 1
                relative = f"bicycle_final/{c}_{k}.JPG"
                touch(root / relative)
                lines.append(f"{image_id} {c} 1 {relative}")
        (root / name).write_text("\n".join(lines) + "\n")


def test_sop_follows_its_train_and_test_lists(tmp_path):
    fake_sop(tmp_path)
    splits = read_retrieval_dataset("sop", tmp_path)
    assert splits.ks == (1, 10, 100)
    np.testing.assert_array_equal(splits.train.classes, np.arange(1, 6))
    np.testing.assert_array_equal(splits.test.classes, np.arange(6, 11))
    assert len(splits.train) == len(splits.test) == 15
    assert splits.test.paths[0] == tmp_path / "bicycle_final" / "6_0.JPG"
    assert_zero_shot(splits)


def test_sop_errors(tmp_path):
    with pytest.raises(DatasetLayoutError, match="Ebay_train.txt and Ebay_test.txt"):
        read_retrieval_dataset("sop", tmp_path)
    fake_sop(tmp_path, test_classes=range(5, 9))
    with pytest.raises(DatasetLayoutError, match="share classes"):
        read_retrieval_dataset("sop", tmp_path)
    fake_sop(tmp_path)
    listing = tmp_path / "Ebay_test.txt"
    listing.write_text("\n".join(listing.read_text().splitlines()[1:]))
    with pytest.raises(DatasetLayoutError, match="header line image_id class_id super_class_id path"):
        read_retrieval_dataset("sop", tmp_path)


# --- In-Shop Clothes -----------------------------------------------------------------------


def fake_inshop(root: Path, *, official_tree: bool) -> None:
    """Items 1-4 train; items 5-8 split into query and gallery images."""
    rows = []
    for item in range(1, 9):
        for k in range(4):
            status = "train" if item <= 4 else ("query" if k < 2 else "gallery")
            rows.append((f"img/WOMEN/Dresses/id_{item:08d}/{k:02d}_1_front.jpg", f"id_{item:08d}", status))
    image_root = root / "Img" if official_tree else root
    listing = root / "Eval" / "list_eval_partition.txt" if official_tree else root / "list_eval_partition.txt"
    for relative, _, _ in rows:
        touch(image_root / relative)
    listing.parent.mkdir(parents=True, exist_ok=True)
    body = [f"{len(rows)}", "image_name item_id evaluation_status", *(" ".join(r) for r in rows)]
    listing.write_text("\n".join(body) + "\n")


@pytest.mark.parametrize("official_tree", [True, False])
def test_inshop_queries_and_gallery_share_items_unseen_in_training(tmp_path, official_tree):
    fake_inshop(tmp_path, official_tree=official_tree)
    splits = read_retrieval_dataset("inshop", tmp_path)
    assert splits.has_query_set and splits.test is None and splits.ks == (1, 10, 20)
    np.testing.assert_array_equal(splits.train.classes, [1, 2, 3, 4])
    np.testing.assert_array_equal(splits.query.classes, [5, 6, 7, 8])
    np.testing.assert_array_equal(splits.gallery.classes, [5, 6, 7, 8])
    assert len(splits.train) == 16 and len(splits.query) == len(splits.gallery) == 8
    assert not set(splits.query.paths) & set(splits.gallery.paths)
    assert_zero_shot(splits)


def test_inshop_errors(tmp_path):
    with pytest.raises(DatasetLayoutError, match="list_eval_partition.txt"):
        read_retrieval_dataset("inshop", tmp_path)
    fake_inshop(tmp_path, official_tree=False)
    listing = tmp_path / "list_eval_partition.txt"
    lines = listing.read_text().splitlines()
    listing.write_text("\n".join(["31", *lines[1:]]))
    with pytest.raises(DatasetLayoutError, match="announces 31 images but lists 32"):
        read_retrieval_dataset("inshop", tmp_path)
    listing.write_text("\n".join([*lines[:2], lines[2].replace("train", "validation"), *lines[3:]]))
    with pytest.raises(DatasetLayoutError, match="unknown evaluation_status"):
        read_retrieval_dataset("inshop", tmp_path)
    listing.write_text("\n".join([*lines[:2], lines[2].replace("id_00000001", "item1"), *lines[3:]]))
    with pytest.raises(DatasetLayoutError, match="id_<digits>"):
        read_retrieval_dataset("inshop", tmp_path)


# --- digits, and the registry --------------------------------------------------------------


def test_digits_are_embedded_uint8_with_digits_0_to_4_for_training():
    splits = read_retrieval_dataset("digits")
    assert splits.ks == (1, 2, 4, 8)
    assert len(splits.train) + len(splits.test) == 1797
    np.testing.assert_array_equal(splits.train.classes, np.arange(5))
    np.testing.assert_array_equal(splits.test.classes, np.arange(5, 10))
    images = splits.train.images
    assert images.dtype == np.uint8 and images.shape[1:] == (8, 8)
    assert images.min() == 0 and images.max() == 255  # grey 0..16 stretched to 0..255
    assert splits.train.paths is None


def test_registry_lists_layouts_and_rejects_unknown_names():
    assert {"cub", "cars", "sop", "inshop", "digits"} <= set(available_datasets())
    assert recommended_ks("sop") == (1, 10, 100)
    with pytest.raises(KeyError, match="available: .*cub"):
        read_retrieval_dataset("imagenet")


@pytest.mark.parametrize("name", available_datasets())
def test_every_reader_without_a_folder_reads_zero_shot_splits_offline_or_asks_for_its_folder(name):
    """Every registered reader (a new one too): zero-shot splits reported with its own Recall@K list, or one line
    naming what to give."""
    try:
        splits = read_retrieval_dataset(name)
    except DatasetLayoutError as error:
        assert str(error) and "\n" not in str(error)
        return
    assert_zero_shot(splits)
    assert splits.ks == recommended_ks(name) and len(splits.train.classes) >= 2


def test_a_new_layout_is_one_registered_function(monkeypatch):
    available_datasets()  # the readers found first, so the registry restored after the test holds them
    monkeypatch.setattr(retrieval_datasets, "_LAYOUTS", dict(retrieval_datasets._LAYOUTS))

    @register_reader("tiny", ks=(1, 3))
    def read_tiny(root):
        images = np.zeros((4, 2, 2), dtype=np.uint8)
        train = ImageRecords(labels=np.array([0, 0]), images=images[:2])
        return RetrievalSplits(name="tiny", train=train, test=ImageRecords(labels=np.array([1, 1]), images=images[2:]), ks=())

    splits = read_retrieval_dataset("tiny")
    assert splits.ks == (1, 3) and len(splits.test) == 2
    with pytest.raises(ValueError, match="already registered"):
        register_reader("tiny", ks=(1,))(read_tiny)


def test_records_contiguous_labels_and_validation():
    records = ImageRecords(labels=np.array([7, 3, 7, 11]), paths=["a", "b", "c", "d"])
    np.testing.assert_array_equal(records.with_contiguous_labels().labels, [1, 0, 1, 2])
    assert records.subset(records.labels == 7).paths == (Path("a"), Path("c"))
    with pytest.raises(ValueError, match="exactly one"):
        ImageRecords(labels=np.array([1]))
    with pytest.raises(ValueError, match="2 images but 1 labels"):
        ImageRecords(labels=np.array([1]), paths=["a", "b"])
    with pytest.raises(ValueError, match="uint8"):
        ImageRecords(labels=np.array([1]), images=np.zeros((1, 4, 4), dtype=np.float32))


def test_queries_with_nothing_of_their_class_to_find_are_counted_and_said():
    images = np.zeros((7, 2, 2), dtype=np.uint8)
    train = ImageRecords(labels=np.array([0]), images=images[:1])
    test = RetrievalSplits("mine", train, (1,), test=ImageRecords(labels=np.array([1, 1, 2, 3, 3, 3, 4]), images=images))
    assert test.lone_queries == 2  # classes 2 and 4 hold one image each
    assert test.lone_queries_note() == (
        "mine: 2 of 7 queries have no other image of their class to find (their test class holds that image alone): "
        "Recall@K, MAP@R and R-Precision leave them out (NMI counts them); add images to those classes, or remove them"
    )
    query = ImageRecords(labels=np.array([1, 2, 5]), images=images[:3])
    gallery = ImageRecords(labels=np.array([1, 2, 2]), images=images[:3])
    shop = RetrievalSplits("shop", train, (1,), query=query, gallery=gallery)
    assert shop.lone_queries == 1 and "1 of 3 queries" in shop.lone_queries_note() and "not in the gallery" in shop.lone_queries_note()
    whole = RetrievalSplits("whole", train, (1,), test=ImageRecords(labels=np.array([1, 1]), images=images[:2]))
    assert whole.lone_queries == 0 and whole.lone_queries_note() is None
