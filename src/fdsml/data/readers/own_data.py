"""Your own images, in the two layouts people have, for retrieval and classification (docs/own-data.md).

* ``imagefolder``: ``root/<class>/<image>``, one sub-folder per class. For classification, ``root/train/<class>/``
  and ``root/test/<class>/`` give the split.
* ``csv``: a CSV file with the columns ``path`` and ``label`` and optionally ``split`` (``train`` or ``test``);
  paths are relative to the CSV file's folder.

Retrieval's split is by class (zero-shot): the first ``train_classes`` of the sorted classes train
(default: the first half), the rest test; a CSV's ``split`` column gives it instead, and must keep
the classes apart. Classification's split is given (``train``/``test`` sub-folders, the ``split``
column) or, without one, drawn per class from the seed (80 / 20, as for ``digits``).
Both layouts register in the readers' registries under ``imagefolder`` and ``csv``. A retrieval
dataset is named after its folder or CSV file (``imagefolder-birds``, ``csv-birds``), so that two
datasets' runs and metrics never mix; a classification dataset keeps the layout's name, as the
``classification.datasets`` entry names it.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fdsml.data.classification_datasets import DIGITS_TEST_FRACTION, ClassificationSplits, register_classification_reader
from fdsml.data.layout import DatasetLayoutError, require_folder
from fdsml.data.retrieval_datasets import ImageRecords, RetrievalSplits, register_reader, split_by_class_rank

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff", ".webp")
SPLITS = ("train", "test")
FOLDER_LAYOUT = "imagefolder: root/<class>/<image> (one sub-folder per class; classification: root/train/<class>/ and root/test/<class>/)"
CSV_LAYOUT = "csv: a CSV file with the header path,label[,split] (paths relative to the CSV's folder; split: train or test)"


@dataclass(frozen=True)
class LabelledImages:
    """Image paths with their class names and, where the layout gives one, each image's split."""

    paths: tuple[Path, ...]
    classes: tuple[str, ...]
    splits: tuple[str, ...] | None = None

    def in_reading_order(self) -> LabelledImages:
        """The images by class (in :meth:`records`' order), then by path: the one order of both layouts, so that
        the same images as class folders or as a CSV, listed in any order, are the same dataset to the last bit."""
        key = _class_order_key(self.classes)
        order = sorted(range(len(self.paths)), key=lambda i: (key(self.classes[i]), str(self.paths[i])))
        splits = None if self.splits is None else tuple(self.splits[i] for i in order)
        return LabelledImages(tuple(self.paths[i] for i in order), tuple(self.classes[i] for i in order), splits)

    def records(self) -> tuple[ImageRecords, tuple[str, ...]]:
        """The images with labels 0..C-1 in sorted class order (numerically when every class is a number), and the names."""
        names = sorted(set(self.classes), key=_class_order_key(self.classes))
        index = {name: i for i, name in enumerate(names)}
        return ImageRecords(labels=np.array([index[c] for c in self.classes]), paths=self.paths), tuple(names)


def _class_order_key(classes: tuple[str, ...]):
    numeric = all(c.lstrip("-").isdigit() for c in classes)
    return (lambda c: (int(c), c)) if numeric else (lambda c: c)


# --- the two layouts ------------------------------------------------------------------------------------------


def read_class_folders(root: Path) -> LabelledImages:
    """``root/<class>/<image>``: every class folder must hold at least one image."""
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise DatasetLayoutError(f"{root}: no class folder found; expected {FOLDER_LAYOUT}")
    paths, labels = [], []
    for folder in classes:
        images = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            raise DatasetLayoutError(
                f"{folder}: class {folder.name!r} holds no image ({', '.join(IMAGE_SUFFIXES)}); add its images or remove the folder"
            )
        paths += images
        labels += [folder.name] * len(images)
    return LabelledImages(tuple(paths), tuple(labels)).in_reading_order()


def read_csv_listing(path: Path) -> LabelledImages:
    """A CSV with the columns path, label and optionally split; every listed image must exist."""
    if not path.is_file():
        raise DatasetLayoutError(f"{path}: CSV file not found; root must be the CSV file itself ({CSV_LAYOUT})")
    try:  # utf-8-sig: a spreadsheet's byte-order mark is not part of the first column's name
        with path.open(newline="", encoding="utf-8-sig") as stream:
            reader = csv.DictReader(stream)
            columns = set(reader.fieldnames or ())
            rows = list(reader)
    except UnicodeDecodeError as error:
        raise DatasetLayoutError(
            f"{path}: not UTF-8 text ({error.reason} at byte {error.start}); save it as CSV in UTF-8 (a spreadsheet's "
            "'CSV UTF-8') and run again"
        ) from None
    if not {"path", "label"} <= columns:
        raise DatasetLayoutError(f"{path}: the header must name the columns path and label (found {sorted(columns)}); {CSV_LAYOUT}")
    if not rows:
        raise DatasetLayoutError(f"{path}: lists no image; {CSV_LAYOUT}")
    for number, row in enumerate(rows, start=2):
        if not (row["path"] or "").strip() or not (row["label"] or "").strip():
            raise DatasetLayoutError(f"{path} line {number}: path and label must both be given; fix or remove the line")
    paths = tuple(path.parent / row["path"].strip() for row in rows)
    _refuse_repeated_paths(path, paths)
    missing = [(number, p) for number, p in enumerate(paths, start=2) if not p.is_file()]
    if missing:
        shown = ", ".join(f"line {n}: {p}" for n, p in missing[:3])
        raise DatasetLayoutError(
            f"{path}: {len(missing)} of {len(paths)} listed images are missing ({shown}); paths are relative to "
            f"{path.parent}: restore the images or remove their lines"
        )
    splits = None
    if "split" in columns:
        splits = tuple((row["split"] or "").strip().lower() for row in rows)
        unknown = sorted(set(splits) - set(SPLITS))
        if unknown:
            number = 2 + next(i for i, s in enumerate(splits) if s in unknown)
            raise DatasetLayoutError(
                f"{path} line {number}: unknown split {unknown[0]!r}; the split column holds train or test "
                "(or drop the column to split by class)"
            )
    return LabelledImages(paths, tuple(row["label"].strip() for row in rows), splits).in_reading_order()


def _refuse_repeated_paths(listing: Path, paths: tuple[Path, ...]) -> None:
    """An image listed twice (two exports merged) would find its own copy at distance 0: refused, with its lines."""
    lines: dict[str, list[int]] = {}
    for number, image in enumerate(paths, start=2):
        lines.setdefault(os.path.normpath(image), []).append(number)
    repeated = [(image, numbers) for image, numbers in lines.items() if len(numbers) > 1]
    if repeated:
        shown = ", ".join(f"lines {' and '.join(map(str, numbers[:2]))}: {os.path.relpath(image, listing.parent)}" for image, numbers in repeated[:3])
        raise DatasetLayoutError(
            f"{listing}: images listed more than once ({len(repeated)}: {shown}); a repeated image finds its own "
            "copy and inflates the scores: list each image once (remove the repeated lines)"
        )


# --- retrieval: a zero-shot split by class --------------------------------------------------------------------


def retrieval_splits(images: LabelledImages, train_classes: int | None, source: Path) -> RetrievalSplits:
    """The first ``train_classes`` sorted classes train (default half), or the listing's own split column."""
    records, names = images.records()
    if images.splits is None:
        count = len(names) // 2 if train_classes is None else train_classes
        if len(names) < 2:
            raise DatasetLayoutError(f"{source}: {len(names)} class found; retrieval trains on some classes and tests on others: give at least 2")
        train, test = split_by_class_rank(records, count, str(source))
        return RetrievalSplits(name="", train=train, test=test, ks=())
    if train_classes is not None:
        raise DatasetLayoutError(
            f"{source}: the split column decides which classes train; leave retrieval.data.train_classes null or drop the column"
        )
    is_train = np.array(images.splits) == "train"
    shared = np.intersect1d(records.labels[is_train], records.labels[~is_train])
    if shared.size:
        raise DatasetLayoutError(
            f"{source}: classes {[names[i] for i in shared[:3]]} are in both train and test; retrieval tests on "
            "unseen classes: give each class one split, or drop the split column to split by class"
        )
    if is_train.all() or not is_train.any():
        raise DatasetLayoutError(f"{source}: the split column must list both train and test images")
    return RetrievalSplits(name="", train=records.subset(is_train), test=records.subset(~is_train), ks=())


@register_reader("imagefolder", ks=(1, 2, 4, 8), named_by_root=True, class_split=True)
def _read_folder_for_retrieval(root: Path | None, train_classes: int | None) -> RetrievalSplits:
    images = read_class_folders(require_folder(root, "imagefolder", FOLDER_LAYOUT))
    if set(images.classes) == set(SPLITS):
        raise DatasetLayoutError(
            f"{root}: holds train/ and test/, classification's layout; retrieval splits by class itself: point "
            "retrieval.data.root at a folder of class folders (e.g. its train/), or use classification"
        )
    return retrieval_splits(images, train_classes, root)


@register_reader("csv", ks=(1, 2, 4, 8), named_by_root=True, class_split=True)
def _read_csv_for_retrieval(root: Path | None, train_classes: int | None) -> RetrievalSplits:
    if root is None:
        raise DatasetLayoutError(f"csv: give the CSV file as root; {CSV_LAYOUT}")
    return retrieval_splits(read_csv_listing(root), train_classes, root)


# --- classification: a given split, or one drawn per class --------------------------------------------------


def classification_splits(name: str, parts: dict[str, LabelledImages] | LabelledImages, seed: int, source: Path) -> ClassificationSplits:
    """``parts`` holds train and test, or one listing to split (its split column, else 80 / 20 per class from ``seed``)."""
    if isinstance(parts, LabelledImages):
        parts = _split_listing(parts, seed)
    train_names, test_names = (set(parts[s].classes) for s in SPLITS)
    if train_names != test_names:
        only = sorted(train_names ^ test_names)
        raise DatasetLayoutError(
            f"{source}: classes {only[:3]} are in only one of train and test; a classifier is scored on the classes it "
            "learnt: give every class images in both splits"
        )
    whole = LabelledImages(parts["train"].paths + parts["test"].paths, parts["train"].classes + parts["test"].classes)
    records, names = whole.records()
    is_train = np.arange(len(records)) < len(parts["train"].paths)
    return ClassificationSplits(name, records.subset(is_train), records.subset(~is_train), len(names), names)


def _split_listing(images: LabelledImages, seed: int) -> dict[str, LabelledImages]:
    if images.splits is not None:
        chosen = np.array(images.splits)
    else:
        from sklearn.model_selection import train_test_split

        counts = {name: images.classes.count(name) for name in set(images.classes)}
        few = sorted(name for name, count in counts.items() if count < 2)
        if few:
            raise DatasetLayoutError(
                f"classes {few[:3]} have one image: drawing a train / test split needs at least 2 per class; add images, "
                "or give the split (train/ and test/ sub-folders, or a split column)"
            )
        drawn = math.ceil(DIGITS_TEST_FRACTION * len(images.paths))  # as scikit-learn rounds the test share
        if min(drawn, len(images.paths) - drawn) < len(counts):
            raise DatasetLayoutError(
                f"{len(images.paths)} images of {len(counts)} classes: a {DIGITS_TEST_FRACTION:.0%} test draw of {drawn} "
                "images cannot hold every class in both splits; add images, or give the split (train/ and test/ "
                "sub-folders, or a split column)"
            )
        indices = np.arange(len(images.paths))
        _, test = train_test_split(indices, test_size=DIGITS_TEST_FRACTION, stratify=np.array(images.classes), random_state=seed)
        chosen = np.where(np.isin(indices, test), "test", "train")
    pairs = list(zip(images.paths, images.classes))
    return {
        split: LabelledImages(tuple(p for (p, _), s in zip(pairs, chosen) if s == split), tuple(c for (_, c), s in zip(pairs, chosen) if s == split))
        for split in SPLITS
    }


@register_classification_reader("imagefolder")
def _read_folder_for_classification(root: Path | None, seed: int) -> ClassificationSplits:
    root = require_folder(root, "imagefolder", FOLDER_LAYOUT)
    given = [root / split for split in SPLITS]
    if any(folder.is_dir() for folder in given):
        for folder in given:
            require_folder(folder, "imagefolder", FOLDER_LAYOUT)
        parts: dict[str, LabelledImages] | LabelledImages = {split: read_class_folders(root / split) for split in SPLITS}
    else:
        parts = read_class_folders(root)
    return classification_splits("imagefolder", parts, seed, root)


@register_classification_reader("csv")
def _read_csv_for_classification(root: Path | None, seed: int) -> ClassificationSplits:
    if root is None:
        raise DatasetLayoutError(f"csv: give the CSV file as root; {CSV_LAYOUT}")
    return classification_splits("csv", read_csv_listing(root), seed, root)
