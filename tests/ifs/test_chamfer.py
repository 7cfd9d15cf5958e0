"""The L1 Chamfer distance against brute force, hand-made masks and the empty-image convention."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from fdsml.ifs.chamfer import chamfer_distance, chamfer_distances, chamfer_pairs, empty_distance


def brute_force(a: np.ndarray, b: np.ndarray) -> float:
    """docs/method.md §6.1's formula over all pixel pairs."""
    d = cdist(np.argwhere(a), np.argwhere(b), metric="cityblock")
    return 0.5 * (d.min(axis=1).mean() + d.min(axis=0).mean())


def test_matches_brute_force_on_random_masks():
    rng = np.random.default_rng(0)
    for _ in range(150):
        shape = tuple(rng.integers(1, 16, size=2))
        a = rng.random(shape) < rng.uniform(0.02, 0.5)
        b = rng.random(shape) < rng.uniform(0.02, 0.5)
        a.flat[rng.integers(a.size)] = True
        b.flat[rng.integers(b.size)] = True
        assert chamfer_distance(a, b) == pytest.approx(brute_force(a, b), abs=1e-12)


def test_matches_brute_force_on_sparse_masks_in_a_large_frame():
    """Few pixels in a large frame: most rows and columns hold none, distances run long."""
    rng = np.random.default_rng(1)
    for _ in range(10):
        a = np.zeros((70, 90), dtype=np.uint8)
        b = np.zeros((70, 90), dtype=np.uint8)
        a[rng.integers(70, size=5), rng.integers(90, size=5)] = 127
        b[rng.integers(70, size=3), rng.integers(90, size=3)] = 127
        assert chamfer_distance(a, b) == pytest.approx(brute_force(a != 0, b != 0), abs=1e-12)


def test_identical_sets_are_at_zero():
    mask = np.random.default_rng(2).random((20, 20)) < 0.3
    assert chamfer_distance(mask, mask.copy()) == 0.0


@pytest.mark.parametrize("shift", [(0, 1), (1, 0), (0, -1), (-1, 0)])
def test_single_pixel_moved_one_pixel_is_at_one(shift):
    a = np.zeros((9, 9), dtype=bool)
    a[4, 4] = True
    b = np.roll(a, shift, axis=(0, 1))
    assert chamfer_distance(a, b) == 1.0


def test_diagonal_step_costs_two_in_l1():
    """L1, not Euclidean (1.41) nor chessboard (1)."""
    a = np.zeros((9, 9), dtype=bool)
    b = np.zeros((9, 9), dtype=bool)
    a[4, 4] = b[5, 5] = True
    assert chamfer_distance(a, b) == 2.0


def test_thin_line_moved_across_is_at_one():
    a = np.zeros((16, 16), dtype=bool)
    a[3:13, 7] = True
    assert chamfer_distance(a, np.roll(a, 1, axis=1)) == 1.0
    assert chamfer_distance(a.T, np.roll(a.T, 1, axis=0)) == 1.0


def test_symmetric_mean_of_the_two_directions():
    """A = {(0,0)}, B = {(0,0), (0,4)}: A->B mean 0, B->A mean (0 + 4) / 2 = 2, so D = 1."""
    a = np.zeros((3, 6), dtype=bool)
    b = np.zeros((3, 6), dtype=bool)
    a[0, 0] = b[0, 0] = b[0, 4] = True
    assert chamfer_distance(a, b) == 1.0
    assert chamfer_distance(b, a) == 1.0


def test_empty_images_have_a_defined_distance():
    empty = np.zeros((10, 12), dtype=np.uint8)
    drawn = empty.copy()
    drawn[3, 3] = 127
    assert chamfer_distance(empty, empty) == 0.0
    assert chamfer_distance(empty, drawn) == chamfer_distance(drawn, empty) == empty_distance((10, 12)) == 20.0
    batch = chamfer_distances(np.stack([empty, drawn, empty]), np.stack([empty, empty, drawn]))
    np.testing.assert_array_equal(batch, [0.0, 20.0, 20.0])


def test_batch_matches_pairs_and_broadcasts_one_image():
    rng = np.random.default_rng(3)
    a = (rng.random((7, 24, 24)) < 0.1).astype(np.uint8) * 127
    b = (rng.random((7, 24, 24)) < 0.2).astype(np.uint8) * 127
    a[:, 0, 0] = b[:, 5, 5] = 127
    expected = [chamfer_distance(x, y) for x, y in zip(a, b)]
    np.testing.assert_allclose(chamfer_distances(a, b), expected, atol=1e-12)
    np.testing.assert_allclose(chamfer_distances(a[0], b), [chamfer_distance(a[0], y) for y in b], atol=1e-12)
    assert np.all(np.isfinite(chamfer_distances(a, b)))


def test_indexed_pairs_of_one_stack_match_each_pair_and_refuse_indices_outside_it():
    rng = np.random.default_rng(4)
    stack = (rng.random((5, 20, 20)) < 0.15).astype(np.uint8) * 127
    stack[3] = 0
    left, right = np.array([0, 0, 4, 3, 2, 1]), np.array([1, 0, 2, 4, 3, 1])
    expected = [chamfer_distance(stack[i], stack[j]) for i, j in zip(left, right)]
    np.testing.assert_allclose(chamfer_pairs(stack, left, right), expected, atol=1e-12)
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        chamfer_pairs(stack, [0, 5], [1, 1])
    with pytest.raises(ValueError, match="one length"):
        chamfer_pairs(stack, [0, 1], [1])


def test_mismatched_frames_are_refused():
    with pytest.raises(ValueError, match="same"):
        chamfer_distance(np.ones((4, 4)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="frame size"):
        chamfer_distances(np.ones((2, 4, 4)), np.ones((2, 5, 4)))
