"""Symmetric L1 Chamfer distance between renderings (docs/method.md §6.1), in pixels.

    D(A, B) = 1/2 * ( mean_{p in A} min_{q in B} |p - q|_1 + mean_{q in B} min_{p in A} |q - p|_1 )

A and B are the foreground (non-zero) pixel sets. ``min_{q in B} |p - q|_1`` is read off an
exact L1 distance transform of B. The L1 metric is separable,
``min_{q} |p - q|_1 = min_{i'} (|i - i'| + h(i', j))`` with ``h`` the distance to the nearest
pixel of B in the same row, and each 1-D stage is exact with one forward and one backward
scan. The row scans run as branch-free Numba loops; the column scans run over whole rows at a
time, which the compiler vectorises. A 256 x 256 pair costs 0.3 to 0.5 ms on one core, about four
times less than two ``scipy.ndimage.distance_transform_cdt`` calls (see
``benchmarks/chamfer_speed.py``).

Empty renderings (a diverging, non-contractive code renders all-zero) have no nearest pixel, so
the formula is undefined there. The convention: two empty images are at distance 0 (the same
shape: nothing), and an empty image is at ``empty_distance(shape) = (H - 1) + (W - 1)`` pixels
from a non-empty one, the largest L1 distance the frame allows, so emptiness counts as "as
different as possible" and never produces NaN.
"""

from __future__ import annotations

import numba as nb
import numpy as np


def empty_distance(shape: tuple[int, ...]) -> float:
    """The distance between an empty and a non-empty image: the frame's L1 diagonal, (H - 1) + (W - 1)."""
    return float(shape[-2] - 1 + shape[-1] - 1)


@nb.njit(cache=True, nogil=True, inline="always")
def _min(a, b):
    """Branch-free minimum of two int32 (a data-dependent branch here costs a misprediction per pixel)."""
    d = a - b
    return b + (d & (d >> np.int32(31)))


@nb.njit(cache=True, nogil=True)
def _row_distances(target, buffer):
    """``buffer[i, j]`` = distance to the nearest ``target`` pixel of row i (at least H + W if none)."""
    height, width = target.shape
    far = np.int32(height + width)
    one = np.int32(1)
    for i in range(height):
        mask = target[i]
        row = buffer[i]
        value = far
        for j in range(width):
            value = (value + one) & (np.int32(mask[j]) - one)
            row[j] = value
        value = far
        for j in range(width - 1, -1, -1):
            value = (value + one) & (np.int32(mask[j]) - one)
            row[j] = _min(row[j], value)


@nb.njit(cache=True, nogil=True)
def _column_envelope(buffer):
    """Turn row distances into the 2-D L1 distance transform: min over rows i' of h(i', j) + |i - i'|."""
    height, width = buffer.shape
    one = np.int32(1)
    for i in range(1, height):
        previous = buffer[i - 1]
        current = buffer[i]
        for j in range(width):
            current[j] = min(current[j], previous[j] + one)
    for i in range(height - 2, -1, -1):
        following = buffer[i + 1]
        current = buffer[i]
        for j in range(width):
            current[j] = min(current[j], following[j] + one)


@nb.njit(cache=True, nogil=True)
def _masked_sum(values, mask):
    total = 0
    for i in range(values.shape[0]):
        row = values[i]
        selected = mask[i]
        partial = np.int32(0)
        for j in range(values.shape[1]):
            partial += row[j] * np.int32(selected[j])
        total += partial
    return total


@nb.njit(cache=True, nogil=True)
def _directed_sum(target, source, buffer):
    """Sum over the pixels of ``source`` of their L1 distance to the nearest pixel of ``target`` (non-empty)."""
    _row_distances(target, buffer)
    _column_envelope(buffer)
    return _masked_sum(buffer, source)


@nb.njit(cache=True, nogil=True)
def _count(mask):
    total = 0
    for i in range(mask.shape[0]):
        row = mask[i]
        partial = np.int32(0)
        for j in range(mask.shape[1]):
            partial += np.int32(row[j])
        total += partial
    return total


@nb.njit(cache=True, nogil=True)
def _pair(a, b, buffer, empty):
    count_a = _count(a)
    count_b = _count(b)
    if count_a == 0 and count_b == 0:
        return 0.0
    if count_a == 0 or count_b == 0:
        return empty
    return 0.5 * (_directed_sum(b, a, buffer) / count_a + _directed_sum(a, b, buffer) / count_b)


@nb.njit(cache=True, nogil=True, parallel=True)
def _batch(images, left, right, empty, n_blocks, out):
    """Pairs ``(images[left[n]], images[right[n]])`` split into ``n_blocks`` contiguous blocks (one
    per thread), each reusing one scratch buffer."""
    n_pairs = left.shape[0]
    height, width = images.shape[1], images.shape[2]
    for block in nb.prange(n_blocks):
        buffer = np.empty((height, width), dtype=np.int32)
        for n in range(block * n_pairs // n_blocks, (block + 1) * n_pairs // n_blocks):
            out[n] = _pair(images[left[n]], images[right[n]], buffer, empty)


def foreground(images: np.ndarray) -> np.ndarray:
    """Binarised renderings: 1 where a pixel is drawn (non-zero), as C-contiguous uint8."""
    return np.ascontiguousarray(np.asarray(images) != 0, dtype=np.uint8)


def chamfer_distance(image_a: np.ndarray, image_b: np.ndarray) -> float:
    """D between two ``(H, W)`` renderings (any dtype, foreground = non-zero), in pixels."""
    a, b = foreground(image_a), foreground(image_b)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"expected two images of the same (H, W) shape, got {a.shape} and {b.shape}")
    buffer = np.empty(a.shape, dtype=np.int32)
    return float(_pair(a, b, buffer, empty_distance(a.shape)))


def chamfer_pairs(images: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """D for each pair ``(images[left[n]], images[right[n]])`` of one ``(M, H, W)`` stack, as an ``(N,)`` array.

    Each image is binarised once however many pairs it is in, and no pair is copied out of the
    stack. Pairs run in parallel over Numba's threads.
    """
    stack = foreground(images)
    if stack.ndim != 3:
        raise ValueError(f"expected an (M, H, W) stack of images, got shape {stack.shape}")
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    if left.shape != right.shape or left.ndim != 1:
        raise ValueError(f"expected two 1-D index arrays of one length, got shapes {left.shape} and {right.shape}")
    if left.size and (min(left.min(), right.min()) < 0 or max(left.max(), right.max()) >= stack.shape[0]):
        raise ValueError(f"pair indices must lie in [0, {stack.shape[0]}) for a stack of {stack.shape[0]} images")
    out = np.empty(left.shape[0], dtype=np.float64)
    _batch(stack, left, right, empty_distance(stack.shape), max(1, min(left.shape[0], nb.get_num_threads())), out)
    return out


def chamfer_distances(images_a: np.ndarray, images_b: np.ndarray) -> np.ndarray:
    """D for each pair ``(images_a[n], images_b[n])`` of two ``(N, H, W)`` stacks, as an ``(N,)`` array.

    Either side may be a single ``(H, W)`` image, compared with every image of the other stack.
    Pairs run in parallel over Numba's threads (:func:`chamfer_pairs` on the two stacks together).
    """
    a, b = np.asarray(images_a), np.asarray(images_b)
    if a.ndim not in (2, 3) or b.ndim not in (2, 3) or a.shape[-2:] != b.shape[-2:]:
        raise ValueError(f"expected (N, H, W) stacks or (H, W) images of one frame size, got {a.shape} and {b.shape}")
    a, b = a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:])
    n_pairs = np.broadcast_shapes(a.shape[:1], b.shape[:1])[0]
    left = np.broadcast_to(np.arange(a.shape[0]), (n_pairs,))
    right = a.shape[0] + np.broadcast_to(np.arange(b.shape[0]), (n_pairs,))
    return chamfer_pairs(np.concatenate([a, b]), left, right)
