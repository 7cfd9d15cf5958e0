"""Chaos-game rendering of IFS codes in Numba (METHOD.md section 1).

Two passes over one orbit: the first iterates the maps and records the points and their
per-axis bounds (a serial chain, the floor of the cost); the second frames the cloud into the
image and rasterises it. Randomness comes from a counter-based SplitMix64 stream keyed by the
seed, so the same code and seed give the same bytes in any process, and nothing touches
NumPy's or Numba's global random state.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Literal

import numba as nb
import numpy as np

from fdsml.seeds import SEED_LIMIT

FOREGROUND = 127
"""Grey level of a drawn pixel (FractalDB draws grey 127 on black)."""

MODES = ("point", "patch")

MAX_SIZE = 46_000
"""Largest image side: the padded image's flat pixel indices must fit in 32 bits."""

GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's counter increment (shared with the orbit families' Perlin noise)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S32 = np.uint64(32)
_S16 = np.uint64(16)
_LOW16 = np.uint64(0xFFFF)
_MASKS = np.uint64(511)


@nb.njit(cache=True, inline="always")
def splitmix64(z):
    """SplitMix64's finaliser: a well-mixed 64-bit integer from a counter state."""
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@nb.njit(cache=True, inline="always")
def _step(coefficients, thresholds, last, x, y, r):
    """Apply the map picked by the high 32 bits of ``r`` (branch-free selection)."""
    pick = r >> _S32
    k = 0
    for m in range(last):
        k += pick >= thresholds[m]
    nx = coefficients[k, 0] * x + coefficients[k, 1] * y + coefficients[k, 4]
    ny = coefficients[k, 2] * x + coefficients[k, 3] * y + coefficients[k, 5]
    return nx, ny


@nb.njit(cache=True, nogil=True)
def _orbit(coefficients, thresholds, n_points, burn_in, seed, xs, ys, masks, want_masks):
    """Iterate the chaos game from (0, 0); fill xs, ys (and 3x3 masks); return the bounds."""
    last = coefficients.shape[0] - 1
    x = 0.0
    y = 0.0
    state = splitmix64(np.uint64(seed) + GOLDEN_GAMMA)
    for _ in range(burn_in):
        state += GOLDEN_GAMMA
        x, y = _step(coefficients, thresholds, last, x, y, splitmix64(state))
    xmin = np.inf
    xmax = -np.inf
    ymin = np.inf
    ymax = -np.inf
    for j in range(n_points):
        state += GOLDEN_GAMMA
        r = splitmix64(state)
        x, y = _step(coefficients, thresholds, last, x, y, r)
        xs[j] = x
        ys[j] = y
        xmin = min(xmin, x)
        xmax = max(xmax, x)
        ymin = min(ymin, y)
        ymax = max(ymax, y)
        if want_masks:
            masks[j] = np.uint16((((r & _LOW16) * _MASKS) >> _S16) + np.uint64(1))
    return xmin, xmax, ymin, ymax


def _axis_framing(low: float, high: float, size: int, margin: int) -> tuple[float, float] | None:
    """One axis's scale and pixel offset: ``[low, high]`` stretched over the ``size - 1 - 2 * margin``
    usable pixels, a degenerate axis centred; ``None`` when the extent or its scale overflows."""
    span = high - low
    if not math.isfinite(span):
        return None
    if span == 0.0:
        return 0.0, size // 2 + 0.5
    scale = float(size - 1 - 2 * margin) / span
    return (scale, margin + 0.5) if math.isfinite(scale) else None


def framing(bounds, last_point, size: int, margin: int) -> tuple[float, ...] | None:
    """``(xmin, ymin, sx, sy, cx, cy)``: a point's column is ``int((x - xmin) * sx + cx)``, its row
    ``size - 1 - int((y - ymin) * sy + cy)``; ``None`` when the orbit cannot be framed (it renders
    empty).

    A coordinate that is not finite stays so under every affine map (infinity times zero is NaN,
    and NaN never leaves), so a finite last point means every point is finite; with finite
    extents and scales every index lies in the image. An orbit that diverges, or stays finite
    but so large (or so thin) that its extent or scale overflows, cannot be framed.
    """
    if not all(math.isfinite(value) for value in (*bounds, *last_point)):
        return None
    xmin, xmax, ymin, ymax = bounds
    x_axis = _axis_framing(xmin, xmax, size, margin)
    y_axis = _axis_framing(ymin, ymax, size, margin)
    if x_axis is None or y_axis is None:
        return None
    return xmin, ymin, x_axis[0], y_axis[0], x_axis[1], y_axis[1]


@nb.njit(cache=True, nogil=True)
def _pixel_indices(xs, ys, frame, size, stride, offset, pixels):
    """The cloud framed by ``frame`` (:func:`framing`) into ``size`` px: each point's flat index
    ``(row + offset) * stride + col + offset``. A loop of its own, so the float to integer
    conversions run in SIMD lanes rather than between the random writes."""
    xmin, ymin, sx, sy, cx, cy = frame
    top = np.int32(size - 1 + offset)
    for j in range(xs.shape[0]):
        col = np.int32((xs[j] - xmin) * sx + cx) + np.int32(offset)
        row = top - np.int32((ys[j] - ymin) * sy + cy)
        pixels[j] = row * np.int32(stride) + col


@nb.njit(cache=True, nogil=True)
def _draw_points(image, pixels):
    flat = image.ravel()
    grey = np.uint8(FOREGROUND)
    for j in range(pixels.shape[0]):
        flat[pixels[j]] = grey


@nb.njit(cache=True, nogil=True)
def _draw_patches(image, pixels, masks, centres):
    """Each point's 3 x 3 mask ORed into its centre pixel of ``centres`` (the image padded by one
    pixel on every side), then every image pixel set when a neighbour's mask has the bit pointing
    at it: the same pixels as stamping point by point, with one random memory access per point
    instead of nine, and one contiguous pass over the image that needs no border cases."""
    padded = centres.ravel()
    for j in range(pixels.shape[0]):
        padded[pixels[j]] |= masks[j]
    size = image.shape[0]
    one = np.uint16(1)
    grey = np.uint8(FOREGROUND)
    for row in range(size):
        above = centres[row]  # the centre at (row - 1, col) sets (row, col) with bit 7 (a step of +1 row)
        level = centres[row + 1]
        below = centres[row + 2]
        out = image[row]
        for col in range(size):
            bits = (
                (below[col + 2] >> 0) | (below[col + 1] >> 1) | (below[col] >> 2)
                | (level[col + 2] >> 3) | (level[col + 1] >> 4) | (level[col] >> 5)
                | (above[col + 2] >> 6) | (above[col + 1] >> 7) | (above[col] >> 8)
            )
            out[col] = np.uint8(bits & one) * grey


def _thresholds(probabilities: np.ndarray) -> np.ndarray:
    """Cumulative probabilities as 32-bit integer thresholds for map selection."""
    cumulative = np.cumsum(np.asarray(probabilities, dtype=np.float64))
    cumulative /= cumulative[-1]
    return np.minimum(np.round(cumulative * 2.0**32), 2.0**32).astype(np.uint64)


def _validated(coefficients, probabilities):
    coefficients = np.ascontiguousarray(coefficients, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if coefficients.ndim != 2 or coefficients.shape[1] != 6 or coefficients.shape[0] == 0:
        raise ValueError(f"coefficients must have shape (N, 6) with N >= 1, got {coefficients.shape}")
    if probabilities.shape != (coefficients.shape[0],):
        raise ValueError(f"probabilities must have shape ({coefficients.shape[0]},), got {probabilities.shape}")
    if np.any(probabilities < 0) or not probabilities.sum() > 0:
        raise ValueError("probabilities must be non-negative with a positive sum")
    return coefficients, probabilities


def chaos_game(coefficients, probabilities, *, points: int, seed: int, burn_in: int = 20) -> np.ndarray:
    """The orbit itself, ``(points, 2)`` in the code's own coordinates (for inspection and tests)."""
    coefficients, probabilities = _validated(coefficients, probabilities)
    xs = np.empty(points)
    ys = np.empty(points)
    _orbit(coefficients, _thresholds(probabilities), points, burn_in, seed, xs, ys, np.empty(0, np.uint16), False)
    return np.stack([xs, ys], axis=1)


def render(
    coefficients,
    probabilities,
    *,
    size: int,
    points: int,
    seed: int,
    mode: str = "patch",
    margin: int = 2,
    burn_in: int = 20,
) -> np.ndarray:
    """Render an IFS code to a ``(size, size)`` uint8 image, zero = background.

    ``mode="point"`` draws one pixel per point; ``mode="patch"`` stamps a random non-empty
    3 x 3 pattern at every point, as FractalDB does. An orbit that cannot be framed (one that
    diverges, or whose extent overflows: :func:`framing`) renders as an empty image.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if size < 3 + 2 * margin or margin < 1:
        raise ValueError(f"size {size} and margin {margin} leave no room: need margin >= 1 and size >= 3 + 2 * margin")
    if size > MAX_SIZE:
        raise ValueError(f"size {size} is too large: pixel indices are 32-bit, so size <= {MAX_SIZE}")
    if points < 1 or burn_in < 0:
        raise ValueError(f"points must be >= 1 and burn_in >= 0, got points={points}, burn_in={burn_in}")
    if not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"seed must lie in [0, 2**63), got {seed}")
    coefficients, probabilities = _validated(coefficients, probabilities)
    patch = mode == "patch"
    xs, ys, masks, pixels, centres = _scratch(points, size, patch)
    bounds = _orbit(coefficients, _thresholds(probabilities), points, burn_in, seed, xs, ys, masks, patch)
    frame = framing(bounds, (xs[-1], ys[-1]), size, margin)
    if frame is None:
        return np.zeros((size, size), dtype=np.uint8)
    if patch:
        image = np.empty((size, size), dtype=np.uint8)  # every pixel is written
        _pixel_indices(xs, ys, frame, size, size + 2, 1, pixels)
        _draw_patches(image, pixels, masks, centres)
    else:
        image = np.zeros((size, size), dtype=np.uint8)
        _pixel_indices(xs, ys, frame, size, size, 0, pixels)
        _draw_points(image, pixels)
    return image


_SCRATCH = threading.local()


def _scratch(points: int, size: int, patch: bool):
    """This thread's working arrays, kept between calls.

    Fresh megabyte-sized arrays come from the kernel as untouched pages, and faulting them in
    cost as much as the chaos game itself; reusing them keeps rendering at the loop's speed.
    ``centres`` is the patch masks' grid, the image padded by one pixel on every side.
    """
    orbit = getattr(_SCRATCH, "orbit", None)
    if orbit is None or orbit[0].shape[0] < points:
        orbit = _SCRATCH.orbit = (np.empty(points), np.empty(points), np.empty(points, np.uint16), np.empty(points, np.int32))
    centres = getattr(_SCRATCH, "centres", None)
    if centres is None or centres.shape[0] != size + 2:
        centres = _SCRATCH.centres = np.empty((size + 2, size + 2), np.uint16)
    if patch:
        centres[...] = 0
    return *(array[:points] for array in orbit), centres


def occupancy(image: np.ndarray) -> float:
    """Fraction of non-zero pixels."""
    return float(np.count_nonzero(image)) / image.size


@dataclass(frozen=True)
class RenderSettings:
    """How a dataset renders its codes: one object passed wherever images are made."""

    size: int = 64
    points: int = 10_000
    mode: Literal["point", "patch"] = "patch"
    margin: int = 2
    burn_in: int = 20

    def __post_init__(self):
        if self.margin < 1 or self.size < 3 + 2 * self.margin:
            raise ValueError(f"size ({self.size}) and margin ({self.margin}): need margin >= 1 and size >= 3 + 2 * margin")
        if self.points < 1:
            raise ValueError(f"points: must be positive, got {self.points}")
        if self.burn_in < 0:
            raise ValueError(f"burn_in: must be >= 0, got {self.burn_in}")

    def render(self, coefficients, probabilities, seed: int) -> np.ndarray:
        """``render`` with these settings."""
        return render(
            coefficients,
            probabilities,
            size=self.size,
            points=self.points,
            seed=seed,
            mode=self.mode,
            margin=self.margin,
            burn_in=self.burn_in,
        )
