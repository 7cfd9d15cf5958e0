"""Tiny datasets of generated PNGs in the two layouts of your own data (docs/own-data.md) and in Stanford Online Products'."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image


def write_png(path: Path, class_index: int, rng: np.random.Generator, size: int = 24) -> Path:
    """A size x size RGB picture: one colour and stripe period per class, noise per image."""
    y, x = np.mgrid[0:size, 0:size]
    stripes = ((x + y) // (2 + class_index % 4)) % 2
    colour = np.array([(37 * class_index) % 256, (91 * class_index + 60) % 256, (53 * class_index + 120) % 256])
    image = stripes[..., None] * colour + rng.integers(0, 40, size=(size, size, 3))
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(path)
    return path


def write_image_folder(root: Path, classes: int = 6, per_class: int = 5, seed: int = 0) -> Path:
    """``root/<class>/<image>.png``: classes named class_00, class_01, ..."""
    rng = np.random.default_rng(seed)
    for c in range(classes):
        for i in range(per_class):
            write_png(root / f"class_{c:02d}" / f"{i}.png", c, rng)
    return root


def write_csv_listing(csv_path: Path, classes: int = 6, per_class: int = 5, splits: dict[int, str] | None = None, seed: int = 0) -> Path:
    """A CSV (path,label[,split]) with its images in ``images/`` beside it; ``splits`` maps a class index to its split."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(classes):
        for i in range(per_class):
            relative = f"images/{c}_{i}.png"
            write_png(csv_path.parent / relative, c, rng)
            rows.append({"path": relative, "label": f"bird{c}"} | ({"split": splits[c]} if splits else {}))
    with csv_path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return csv_path


def tiny_sop(root: Path, classes_per_split: int = 2, images_per_class: int = 3) -> Path:
    """A Stanford Online Products layout of a few real PNG images: the layout a custom set takes today."""
    rng = np.random.default_rng(0)
    for name, first in (("Ebay_train.txt", 1), ("Ebay_test.txt", 1 + classes_per_split)):
        rows = ["image_id class_id super_class_id path"]
        for label in range(first, first + classes_per_split):
            for index in range(images_per_class):
                path = f"images/{label}_{index}.png"
                (root / "images").mkdir(parents=True, exist_ok=True)
                Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(root / path)
                rows.append(f"{len(rows)} {label} 1 {path}")
        (root / name).write_text("\n".join(rows) + "\n")
    return root


def write_omniglot_folder(root: Path, classes: int, per_class: int, seed: int = 0) -> Path:
    """``root/<alphabet>_<character>/<drawing>.png``: ``classes`` characters of the embedded Omniglot drawn with ``seed``,
    the first ``per_class`` of their 20 drawings each, as Omniglot draws them (black strokes on white, 105 px): a
    folder of small grey-scale line drawings such as a researcher brings (docs/own-data.md's worked example)."""
    from fdsml.data.readers.omniglot import read_omniglot_images

    images, labels, alphabets = read_omniglot_images()
    for character in np.sort(np.random.default_rng(seed).choice(labels.max() + 1, classes, replace=False)):
        folder = root / f"{alphabets[character]}_{character:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        for index, row in enumerate(np.flatnonzero(labels == character)[:per_class]):
            Image.fromarray(255 - images[row]).save(folder / f"{index:02d}.png")
    return root
