"""The baselines: raw pixels at the test view, and a nearest-centroid classifier, checked against hand computations."""

import numpy as np
import pytest
import torch

from fdsml.data import ImageRecords, ImageTransform
from fdsml.evaluation.baselines import class_sums, nearest_centroid_scores, pixel_vectors


def test_pixels_are_the_test_view_shrunk_by_area_then_flattened():
    images = np.zeros((2, 8, 8), dtype=np.uint8)
    images[0, :4, :4] = 255  # a white top-left quarter
    images[1, :, 4:] = 255  # a white right half
    records = ImageRecords(labels=np.array([0, 1]), images=images)
    view = ImageTransform(8, train=False, crop_fraction=1.0)
    full = pixel_vectors(records, view, 8)
    assert full.shape == (2, 3 * 8 * 8) and full[0].reshape(3, 8, 8)[0, 0, 0] == pytest.approx(1.0)
    shrunk = pixel_vectors(records, view, 2).reshape(2, 3, 2, 2)
    # 2 x 2 cells of 4 x 4 pixels each: their means, in every channel (grey is replicated)
    np.testing.assert_allclose(shrunk[0, 0], [[1.0, 0.0], [0.0, 0.0]], atol=1e-6)
    np.testing.assert_allclose(shrunk[1, 2], [[0.0, 1.0], [0.0, 1.0]], atol=1e-6)


def _indexed(labels: np.ndarray) -> ImageRecords:
    """Records whose image i holds the value i everywhere: a vector lookup can tell which rows a chunk holds."""
    return ImageRecords(labels=labels, images=np.arange(len(labels), dtype=np.uint8)[:, None, None] * np.ones((1, 2, 2), np.uint8))


def test_the_nearest_centroid_classifier_by_hand():
    train = np.array([[1.0, 0.0, 0.0], [2.0, 0.2, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 5.0]])
    records = _indexed(np.array([0, 0, 1, 3]))  # class 2 has no training image
    sums = class_sums(lambda part: train[part.images[:, 0, 0]], records, num_classes=4)
    test = np.array([[0.9, 0.1, 0.0], [0.2, 0.8, 0.0], [0.0, 0.1, 0.2], [0.1, 0.0, 1.0]])
    truth = np.array([0, 0, 2, 3])
    scores, hits = nearest_centroid_scores(sums, test, truth)
    # by cosine the nearest centroids are those of classes 0, 1, 3 and 3: class 2, without a centroid, is never predicted
    assert hits.tolist() == [True, False, False, True] and scores["top1"] == pytest.approx(0.5)
    assert scores["top5"] == pytest.approx(1.0)  # four classes: every one is among the top five


def test_class_sums_read_in_chunks_equal_those_read_whole_and_by_hand():
    rng = np.random.default_rng(0)
    vectors, labels = rng.normal(size=(50, 6)), rng.integers(0, 4, 50)
    records = _indexed(labels)
    chunked = class_sums(lambda part: vectors[part.images[:, 0, 0]], records, 4, chunk=7)
    whole = class_sums(lambda part: vectors[part.images[:, 0, 0]], records, 4, chunk=100)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    by_hand = torch.tensor(np.stack([unit[labels == c].sum(axis=0) for c in range(4)]))
    torch.testing.assert_close(chunked, whole)
    torch.testing.assert_close(chunked, by_hand)


def test_class_sums_off_rank_0_are_none():
    """Under DDP only rank 0 holds vectors: every other rank gets no sums, whatever the chunking."""
    assert class_sums(lambda part: None, _indexed(np.array([0, 1, 1])), 2, chunk=2) is None
