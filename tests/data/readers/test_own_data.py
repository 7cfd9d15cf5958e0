"""Your own images: class folders and CSV listings read through the registries, split as documented, bad layouts named."""

import numpy as np
import pytest

from fdsml.data import DatasetLayoutError, read_retrieval_dataset
from fdsml.data.classification_datasets import read_classification_dataset

from tests.own_images import write_csv_listing, write_image_folder, write_png


def test_a_class_folder_dataset_trains_on_the_first_half_of_its_sorted_classes(tmp_path):
    root = write_image_folder(tmp_path / "birds", classes=5, per_class=3)
    splits = read_retrieval_dataset("imagefolder", root)
    assert splits.name == "imagefolder-birds" and splits.ks == (1, 2, 4, 8)
    assert {p.parent.name for p in splits.train.paths} == {"class_00", "class_01"}  # 5 // 2 classes
    assert {p.parent.name for p in splits.test.paths} == {"class_02", "class_03", "class_04"}
    assert len(splits.train) == 6 and len(splits.test) == 9
    three = read_retrieval_dataset("imagefolder", root, train_classes=3)
    assert {p.parent.name for p in three.train.paths} == {"class_00", "class_01", "class_02"}
    with pytest.raises(DatasetLayoutError, match=r"5 classes found; retrieval.data.train_classes is 5, .*\(1 to 4\)"):
        read_retrieval_dataset("imagefolder", root, train_classes=5)


def test_numeric_class_names_sort_as_numbers(tmp_path):
    rng = np.random.default_rng(0)
    for name in ("2", "10", "9", "1"):
        write_png(tmp_path / "digits" / name / "a.png", int(name), rng)
    splits = read_retrieval_dataset("imagefolder", tmp_path / "digits")
    assert {p.parent.name for p in splits.train.paths} == {"1", "2"}


def test_a_csv_dataset_splits_by_class_or_by_its_split_column(tmp_path):
    listing = write_csv_listing(tmp_path / "birds.csv", classes=4, per_class=2)
    splits = read_retrieval_dataset("csv", listing)
    assert splits.name == "csv-birds" and len(splits.train) == 4 and len(splits.test) == 4
    assert all(p.is_file() and p.parent == tmp_path / "images" for p in splits.train.paths)
    given = write_csv_listing(tmp_path / "given.csv", classes=4, per_class=2, splits={0: "test", 1: "train", 2: "test", 3: "train"})
    splits = read_retrieval_dataset("csv", given)
    assert sorted(p.name for p in splits.train.paths) == ["1_0.png", "1_1.png", "3_0.png", "3_1.png"]


def test_cub_and_cars_class_splits_are_parameters_with_the_protocols_defaults(tmp_path):
    root = tmp_path / "CUB"
    (root / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    lines, labels = [], []
    for i in range(1, 7):  # 6 images of classes 1..6
        write_png(root / "images" / f"{i}.png", i, rng)
        lines.append(f"{i} {i}.png")
        labels.append(f"{i} {i}")
    (root / "images.txt").write_text("\n".join(lines))
    (root / "image_class_labels.txt").write_text("\n".join(labels))
    with pytest.raises(DatasetLayoutError, match=r"6 classes found; retrieval.data.train_classes is 100"):
        read_retrieval_dataset("cub", root)  # the protocol trains on 100 classes
    splits = read_retrieval_dataset("cub", root, train_classes=4)
    assert splits.train.classes.tolist() == [1, 2, 3, 4] and splits.test.classes.tolist() == [5, 6]
    with pytest.raises(DatasetLayoutError, match="sop has its split given by its files"):
        read_retrieval_dataset("sop", root, train_classes=4)


def test_an_empty_class_folder_is_named_with_the_fix(tmp_path):
    root = write_image_folder(tmp_path / "birds", classes=3, per_class=2)
    for image in (root / "class_01").iterdir():
        image.unlink()
    (root / "class_01" / "notes.txt").write_text("not an image")
    with pytest.raises(DatasetLayoutError, match=r"class_01: class 'class_01' holds no image .*; add its images or remove the folder"):
        read_retrieval_dataset("imagefolder", root)


def test_retrieval_on_a_classification_folder_says_so_rather_than_taking_train_and_test_for_classes(tmp_path):
    write_image_folder(tmp_path / "pets" / "train", classes=2, per_class=2)
    write_image_folder(tmp_path / "pets" / "test", classes=2, per_class=2)
    with pytest.raises(DatasetLayoutError, match=r"pets: holds train/ and test/, classification's layout; .*point retrieval.data.root"):
        read_retrieval_dataset("imagefolder", tmp_path / "pets")


def test_bad_csv_listings_name_the_file_the_line_and_the_fix(tmp_path):
    listing = write_csv_listing(tmp_path / "birds.csv", classes=2, per_class=2)
    (tmp_path / "images" / "1_0.png").unlink()
    with pytest.raises(DatasetLayoutError, match=r"birds.csv: 1 of 4 listed images are missing \(line 4: .*1_0.png\); paths are relative to"):
        read_retrieval_dataset("csv", listing)
    odd = write_csv_listing(tmp_path / "odd.csv", classes=2, per_class=2, splits={0: "train", 1: "validation"})
    with pytest.raises(DatasetLayoutError, match=r"odd.csv line 4: unknown split 'validation'; the split column holds train or test"):
        read_retrieval_dataset("csv", odd)
    (tmp_path / "header.csv").write_text("file,class\na.png,1\n")
    with pytest.raises(DatasetLayoutError, match=r"header.csv: the header must name the columns path and label \(found \['class', 'file'\]\)"):
        read_retrieval_dataset("csv", tmp_path / "header.csv")
    with pytest.raises(DatasetLayoutError, match="root must be the CSV file itself"):
        read_retrieval_dataset("csv", tmp_path / "nothing.csv")
    shared = write_csv_listing(tmp_path / "shared.csv", classes=2, per_class=2, splits={0: "train", 1: "train"})
    lines = shared.read_text().splitlines()
    shared.write_text("\n".join([*lines[:-1], lines[-1].replace("train", "test")]) + "\n")
    with pytest.raises(DatasetLayoutError, match=r"classes \['bird1'\] are in both train and test; retrieval tests on unseen classes"):
        read_retrieval_dataset("csv", shared)


def test_classification_takes_train_and_test_subfolders_with_the_same_classes(tmp_path):
    root = tmp_path / "pets"
    write_image_folder(root / "train", classes=3, per_class=4)
    write_image_folder(root / "test", classes=3, per_class=2, seed=1)
    splits = read_classification_dataset("imagefolder", root)
    assert splits.name == "imagefolder" and splits.num_classes == 3
    assert splits.class_names == ("class_00", "class_01", "class_02")
    assert np.bincount(splits.train.labels).tolist() == [4, 4, 4] and np.bincount(splits.test.labels).tolist() == [2, 2, 2]
    assert all("train" in p.parts for p in splits.train.paths) and all("test" in p.parts for p in splits.test.paths)
    write_image_folder(root / "train", classes=4, per_class=4)  # class_03 only in train
    with pytest.raises(DatasetLayoutError, match=r"pets: classes \['class_03'\] are in only one of train and test"):
        read_classification_dataset("imagefolder", root)


def test_classification_without_a_given_split_draws_one_per_class_from_the_seed(tmp_path):
    root = write_image_folder(tmp_path / "pets", classes=3, per_class=5)
    splits = read_classification_dataset("imagefolder", root, seed=0)
    assert np.bincount(splits.train.labels).tolist() == [4, 4, 4] and np.bincount(splits.test.labels).tolist() == [1, 1, 1]
    again, other = (read_classification_dataset("imagefolder", root, seed=s) for s in (0, 1))
    assert again.test.paths == splits.test.paths and set(again.test.paths).isdisjoint(again.train.paths)
    assert other.test.paths != splits.test.paths
    listing = write_csv_listing(tmp_path / "pets.csv", classes=2, per_class=3, splits={0: "train", 1: "test"})
    with pytest.raises(DatasetLayoutError, match=r"classes \['bird0', 'bird1'\] are in only one of train and test"):
        read_classification_dataset("csv", listing)


def test_a_csv_saved_with_a_byte_order_mark_reads_and_one_in_another_encoding_is_named(tmp_path):
    listing = write_csv_listing(tmp_path / "birds.csv", classes=4, per_class=2)
    plain = read_retrieval_dataset("csv", listing)
    listing.write_bytes(b"\xef\xbb\xbf" + listing.read_bytes())  # as spreadsheet programs save "CSV UTF-8"
    marked = read_retrieval_dataset("csv", listing)
    assert marked.train.paths == plain.train.paths and marked.test.paths == plain.test.paths
    listing.write_bytes(listing.read_text(encoding="utf-8-sig").replace("bird", "oiseau\u00e9").encode("utf-16"))
    with pytest.raises(DatasetLayoutError, match=r"birds.csv: not UTF-8 text .*; save it as CSV in UTF-8"):
        read_retrieval_dataset("csv", listing)


def test_an_image_listed_twice_in_a_csv_is_refused_with_its_lines(tmp_path):
    listing = write_csv_listing(tmp_path / "birds.csv", classes=4, per_class=2)
    header, *rows = listing.read_text().splitlines()
    listing.write_text("\n".join([header, *rows, *rows]) + "\n")  # two exports merged
    with pytest.raises(
        DatasetLayoutError,
        match=r"birds.csv: images listed more than once \(8: lines 2 and 10: images/0_0.png, lines 3 and 11: "
        r"images/0_1.png, .*\); .*list each image once",
    ):
        read_retrieval_dataset("csv", listing)
    listing.write_text("\n".join([header, *rows, rows[0].replace("images/", "./images/")]) + "\n")  # one file, two spellings
    with pytest.raises(DatasetLayoutError, match=r"images listed more than once \(1: lines 2 and 10: images/0_0.png\)"):
        read_retrieval_dataset("csv", listing)


def test_the_same_images_as_class_folders_and_as_a_csv_in_any_order_are_the_same_dataset(tmp_path):
    root = write_image_folder(tmp_path / "birds", classes=5, per_class=5)
    for old, new in (("class_00", "10"), ("class_01", "9"), ("class_02", "2"), ("class_03", "1"), ("class_04", "30")):
        (root / old).rename(root / new)  # numeric names: 1, 2, 9 before 10 before 30, where the text order differs
    rows = [f"{image.relative_to(tmp_path)},{image.parent.name}" for image in sorted(root.rglob("*.png"))]
    np.random.default_rng(0).shuffle(rows)
    (tmp_path / "birds.csv").write_text("path,label\n" + "\n".join(rows) + "\n")
    folders, listed = read_retrieval_dataset("imagefolder", root), read_retrieval_dataset("csv", tmp_path / "birds.csv")
    for part in ("train", "test"):
        assert getattr(folders, part).paths == getattr(listed, part).paths
        assert getattr(folders, part).labels.tolist() == getattr(listed, part).labels.tolist()
    assert [p.parent.name for p in folders.train.paths] == ["1"] * 5 + ["2"] * 5
    assert [p.name for p in folders.train.paths] == [f"{i}.png" for i in range(5)] * 2
    drawn = [read_classification_dataset(name, source, seed=3) for name, source in (("imagefolder", root), ("csv", tmp_path / "birds.csv"))]
    assert drawn[0].train.paths == drawn[1].train.paths and drawn[0].test.paths == drawn[1].test.paths
    assert drawn[0].class_names == drawn[1].class_names == ("1", "2", "9", "10", "30")


def test_a_listing_too_small_for_a_drawn_split_to_hold_every_class_is_named(tmp_path):
    root = write_image_folder(tmp_path / "pets", classes=4, per_class=3)  # a 20 % draw of 12 images is 3: fewer than 4 classes
    with pytest.raises(DatasetLayoutError, match=r"12 images of 4 classes: a 20% test draw of 3 images cannot hold every class"):
        read_classification_dataset("imagefolder", root)


def test_retrieval_needs_two_classes_and_a_split_column_with_both_sides(tmp_path):
    with pytest.raises(DatasetLayoutError, match="1 class found; retrieval trains on some classes and tests on others: give at least 2$"):
        read_retrieval_dataset("imagefolder", write_image_folder(tmp_path / "one", classes=1, per_class=2))
    two = read_retrieval_dataset("imagefolder", write_image_folder(tmp_path / "two", classes=2, per_class=2))
    assert two.name == "imagefolder-two" and two.ks == (1, 2, 4, 8)
    assert {p.parent.name for p in two.train.paths} == {"class_00"} and {p.parent.name for p in two.test.paths} == {"class_01"}
    all_train = write_csv_listing(tmp_path / "all_train.csv", classes=2, per_class=2, splits={0: "train", 1: "train"})
    with pytest.raises(DatasetLayoutError, match=r"all_train\.csv: the split column must list both train and test images"):
        read_retrieval_dataset("csv", all_train)
    given = write_csv_listing(tmp_path / "given.csv", classes=2, per_class=2, splits={0: "train", 1: "test"})
    with pytest.raises(DatasetLayoutError, match=r"given\.csv: the split column decides which classes train; leave retrieval"):
        read_retrieval_dataset("csv", given, train_classes=1)


def test_a_class_of_one_image_cannot_be_split_for_classification_and_is_named(tmp_path):
    root = write_image_folder(tmp_path / "pets", classes=3, per_class=10)
    write_png(root / "lonely" / "only.png", 3, np.random.default_rng(0))
    write_png(root / "pair" / "a.png", 4, np.random.default_rng(1))
    write_png(root / "pair" / "b.png", 4, np.random.default_rng(2))
    with pytest.raises(DatasetLayoutError) as refused:
        read_classification_dataset("imagefolder", root)
    assert str(refused.value).startswith(
        "classes ['lonely'] have one image: drawing a train / test split needs at least 2 per class; add images, "
        "or give the split (train/ and test/ sub-folders, or a split column)"
    )
    (root / "lonely" / "only.png").unlink()
    (root / "lonely").rmdir()
    splits = read_classification_dataset("imagefolder", root)  # two images: one each side
    assert sum(p.parent.name == "pair" for p in splits.test.paths) == 1 == sum(p.parent.name == "pair" for p in splits.train.paths)


def test_a_csv_without_images_or_with_a_half_empty_line_is_named_by_its_line(tmp_path):
    (tmp_path / "empty.csv").write_text("path,label\n")
    with pytest.raises(DatasetLayoutError, match=r"empty\.csv: lists no image; "):
        read_retrieval_dataset("csv", tmp_path / "empty.csv")
    for row in ("images/0_1.png,", ",bird0", " , "):
        listing = write_csv_listing(tmp_path / "half.csv", classes=2, per_class=2)
        lines = listing.read_text().splitlines()
        listing.write_text("\n".join([lines[0], lines[1], row, *lines[3:]]) + "\n")  # the file's line 3
        with pytest.raises(DatasetLayoutError, match=r"half\.csv line 3: path and label must both be given; fix or remove the line$"):
            read_retrieval_dataset("csv", listing)
