"""Omniglot's two small background sets as zero-shot retrieval datasets split by alphabet.

Real handwritten characters (Lake, Salakhutdinov and Tenenbaum, Science 2015; MIT licence), 105 x 105,
20 drawers per character, shipped in ``fdsml/data/embedded/omniglot/`` with their licence and credit.
The two zips are read as they are (a user's copy: ``root`` = a folder holding them); their union
counts Greek and Latin, present byte-identical in both, once: 8 alphabets, 242 characters, 4,840 images.

* ``omniglot``: training alphabets :data:`TRAIN_ALPHABETS` (136 characters, 2,720 images), test
  alphabets :data:`TEST_ALPHABETS` (106 characters, 2,120 images). No test alphabet is used to train
  or to choose a setting.
* ``omniglot_validation``: for whatever is chosen by measurement, the training alphabets alone:
  :data:`VALIDATION_ALPHABET` is held out as the test split, the others train.

Polarity: the images are inverted on reading, white strokes on black, as the formula families render
(bright shapes on a dark ground). Pre-training and its transfer then see the same figure-ground
relation, and the black that resizing, cropping and padding bring in is background, not ink.
Labels: one per (alphabet, character), numbered in sorted order over the union.
"""

from __future__ import annotations

import hashlib
import io
import logging
import zipfile
from pathlib import Path, PurePosixPath

import numpy as np
from PIL import Image

from fdsml.data.layout import DatasetLayoutError, require_folder
from fdsml.data.retrieval_datasets import ImageRecords, RetrievalSplits, register_reader

logger = logging.getLogger(__name__)

EMBEDDED_ROOT = Path(__file__).parents[1] / "embedded" / "omniglot"
ZIPS = {
    "images_background_small1.zip": "f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4",
    "images_background_small2.zip": "3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f",
}
TRAIN_ALPHABETS = ("Balinese", "Early_Aramaic", "Greek", "Korean", "Latin")
TEST_ALPHABETS = ("Japanese_(katakana)", "Sanskrit", "Tagalog")
VALIDATION_ALPHABET = "Early_Aramaic"
"""The training alphabet held out by ``omniglot_validation`` (22 characters, 440 images)."""
_EXPECTED = f"{' and '.join(ZIPS)} (Omniglot's small background sets, layout <set>/<alphabet>/characterNN/*.png)"


def read_omniglot_images(root: Path | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Every image of the union: uint8 (N, 105, 105) white-on-black, labels (N,), and each label's alphabet.

    Images sort by (alphabet, character, file name); an alphabet present in both zips must be
    byte-identical there, and each zip must match its published checksum.
    """
    root = EMBEDDED_ROOT if root is None else require_folder(root, "Omniglot", _EXPECTED)
    files: dict[PurePosixPath, bytes] = {}
    shared: set[PurePosixPath] = set()
    for name, digest in ZIPS.items():
        path = root / name
        if not path.is_file():
            raise DatasetLayoutError(f"Omniglot: {name} not found in {root}; the folder must contain {_EXPECTED}")
        content = path.read_bytes()
        if hashlib.sha256(content).hexdigest() != digest:
            raise DatasetLayoutError(f"Omniglot: {path} does not match its published sha256 {digest}; replace it with a good copy")
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            for member in archive.namelist():
                if member.endswith(".png"):
                    key = PurePosixPath(*PurePosixPath(member).parts[1:])  # without the set's own folder
                    data = archive.read(member)
                    if key in files:
                        if files[key] != data:
                            raise DatasetLayoutError(f"Omniglot: {key} differs between the two sets; use the published zips")
                        shared.add(key)
                    files[key] = data
    alphabets = sorted({key.parts[0] for key in shared})
    logger.debug("Omniglot: %d images (%s) are in both background sets as shipped: each counted once", len(shared), ", ".join(alphabets))
    keys = sorted(files)
    characters = sorted({key.parts[:2] for key in keys})
    label_of = {character: label for label, character in enumerate(characters)}
    labels = np.array([label_of[key.parts[:2]] for key in keys], dtype=np.int64)
    images = np.stack([255 - np.asarray(Image.open(io.BytesIO(files[key])).convert("L")) for key in keys])
    return images, labels, tuple(alphabet for alphabet, _ in characters)


def _alphabet_splits(root: Path | None, train: tuple[str, ...], test: tuple[str, ...]) -> RetrievalSplits:
    images, labels, alphabets = read_omniglot_images(root)
    alphabet = np.asarray(alphabets)[labels]
    missing = sorted(set(train + test) - set(alphabets))
    if missing:
        raise DatasetLayoutError(f"Omniglot: alphabet(s) {', '.join(missing)} not found; expected {_EXPECTED}")
    records = ImageRecords(labels=labels, images=images)
    return RetrievalSplits(name="omniglot", train=records.subset(np.isin(alphabet, train)), test=records.subset(np.isin(alphabet, test)), ks=())


@register_reader("omniglot", ks=(1, 2, 4, 8))
def _read_omniglot(root: Path | None) -> RetrievalSplits:
    """Train on :data:`TRAIN_ALPHABETS`, test on :data:`TEST_ALPHABETS`."""
    return _alphabet_splits(root, TRAIN_ALPHABETS, TEST_ALPHABETS)


@register_reader("omniglot_validation", ks=(1, 2, 4, 8))
def _read_omniglot_validation(root: Path | None) -> RetrievalSplits:
    """The training alphabets only: :data:`VALIDATION_ALPHABET` tests, the other four train."""
    return _alphabet_splits(root, tuple(a for a in TRAIN_ALPHABETS if a != VALIDATION_ALPHABET), (VALIDATION_ALPHABET,))
