"""``digits`` (embedded, offline): scikit-learn's 1,797 real 8 x 8 handwritten digits (grey 0..16, read as uint8
0..255). Retrieval: digits 0-4 train, 5-9 test. Classification: a stratified 80 / 20 split per class, drawn from the seed."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from fdsml.data.classification_datasets import DIGITS_TEST_FRACTION, ClassificationSplits, register_classification_reader
from fdsml.data.retrieval_datasets import ImageRecords, RetrievalSplits, register_reader

logger = logging.getLogger(__name__)


@register_reader("digits", ks=(1, 2, 4, 8))
def _read_retrieval_digits(root: Path | None) -> RetrievalSplits:
    """scikit-learn's handwritten digits (grey 0..16) as uint8 0..255; digits 0-4 train, 5-9 test."""
    from sklearn.datasets import load_digits

    if root is not None:
        logger.warning("digits ships with scikit-learn; the folder %s is not read", root)
    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    records = ImageRecords(labels=digits.target, images=images)
    is_train = records.labels <= 4
    return RetrievalSplits(name="digits", train=records.subset(is_train), test=records.subset(~is_train), ks=())


@register_classification_reader("digits")
def _read_classification_digits(root: Path | None, seed: int) -> ClassificationSplits:
    """scikit-learn's digits (grey 0..16 -> uint8 0..255), a stratified 80 / 20 split drawn from ``seed``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if root is not None:
        logger.warning("digits ships with scikit-learn; the folder %s is not read", root)
    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    records = ImageRecords(labels=digits.target, images=images)
    train, test = train_test_split(
        np.arange(len(records)), test_size=DIGITS_TEST_FRACTION, stratify=records.labels, random_state=seed
    )
    names = tuple(str(d) for d in range(10))
    return ClassificationSplits("digits", records.subset(np.sort(train)), records.subset(np.sort(test)), 10, names)
