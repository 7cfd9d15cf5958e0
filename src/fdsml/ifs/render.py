"""Chaos-game rendering of IFS codes in Numba (docs/method.md §1.2).

Two passes over one orbit: the first iterates the maps and records the points and their
per-axis bounds (one walker: a serial chain, the floor of its cost; several: float32 lanes
advanced together in SIMD); the second frames the cloud into the image and rasterises it.
Randomness comes from counter-based streams keyed by the seed (SplitMix64 for one walker,
lowbias32 counters for lanes), so the same code and seed give the same bytes in any process, and
nothing touches NumPy's or Numba's global random state.
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

MAX_WALKERS = 1024
"""Most orbits one rendering may interleave."""

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


@nb.njit(cache=True, inline="always")
def walker_state(seed, walker):
    """The first counter state of walker ``walker``'s stream for an image's ``seed`` (walker 0's is
    the single-orbit renderer's): SplitMix64 of the seed plus ``walker + 1`` golden gammas."""
    return splitmix64(np.uint64(seed) + np.uint64(walker + 1) * GOLDEN_GAMMA)


@nb.njit(cache=True, inline="always")
def _mask(r):
    """A random non-empty 3 x 3 pattern (bits 0..8) from the low 16 bits of the draw that moved the point."""
    return np.uint16((((r & _LOW16) * _MASKS) >> _S16) + np.uint64(1))


@nb.njit(cache=True, nogil=True)
def _orbit(coefficients, thresholds, n_points, burn_in, seed, xs, ys, masks, want_masks):
    """One walker: iterate the chaos game from (0, 0); fill xs, ys (and 3x3 masks); return the
    bounds and whether the last point is finite (a non-finite coordinate never becomes finite
    again under an affine map, so then every point is). The reference renderer, and the codes
    table's; its serial chain of dependent operations sets its speed."""
    last = coefficients.shape[0] - 1
    x = 0.0
    y = 0.0
    state = walker_state(seed, 0)
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
            masks[j] = _mask(r)
    return xmin, xmax, ymin, ymax, np.isfinite(x) and np.isfinite(y)


LANE_GAMMA = np.uint32(0x9E3779B9)
"""The lanes' 32-bit counter increment (the golden ratio's 32 bits)."""
_U15 = np.uint32(15)
_U16 = np.uint32(16)
_U16_LOW = np.uint32(0xFFFF)
_U511 = np.uint32(511)


@nb.njit(cache=True, inline="always")
def lowbias32(c):
    """A well-mixed 32-bit integer from a 32-bit counter (Wellons' lowbias32 hash)."""
    h = np.uint32(np.uint32(c ^ (c >> _U16)) * np.uint32(0x7FEB352D))
    h = np.uint32(np.uint32(h ^ (h >> _U15)) * np.uint32(0x846CA68B))
    return np.uint32(h ^ (h >> _U16))


@nb.njit(cache=True, inline="always")
def _lane_step(first, others, counters, xs, ys, next_xs, next_ys, masks):
    """One step of every lane, one loop over the lanes that LLVM turns into SIMD: lane w's counter
    advances by :data:`LANE_GAMMA` and :func:`lowbias32` of it draws the map (its high 16 bits
    against the 16-bit thresholds) and the 3 x 3 mask (its low 16 bits, as :func:`_mask`); then
    ``next = (a x + b y) + e, (c x + d y) + f`` in float32. Every map is applied to every lane and
    the drawn one kept (a select: looking the drawn map's coefficients up would be a gather, which
    the CPU does lane by lane). ``first`` is map 0's ``(a, b, c, d, e, f)``, ``others`` the other
    maps' ``(threshold, a, b, c, d, e, f)``, a tuple whose length is known when compiling."""
    a, b, c, d, e, f = first
    a, b, c, d, e, f = np.float32(a), np.float32(b), np.float32(c), np.float32(d), np.float32(e), np.float32(f)
    for w in range(counters.shape[0]):
        counter = np.uint32(counters[w] + LANE_GAMMA)
        counters[w] = counter
        h = lowbias32(counter)
        pick = np.float32(h >> _U16)
        masks[w] = np.uint16(np.uint32(np.uint32(h & _U16_LOW) * _U511) >> _U16) + np.uint16(1)
        x = xs[w]
        y = ys[w]
        nx = a * x + b * y + e
        ny = c * x + d * y + f
        for threshold, ma, mb, mc, md, me, mf in others:
            drawn = pick >= np.float32(threshold)
            ma, mb, mc, md, me, mf = np.float32(ma), np.float32(mb), np.float32(mc), np.float32(md), np.float32(me), np.float32(mf)
            nx = ma * x + mb * y + me if drawn else nx
            ny = mc * x + md * y + mf if drawn else ny
        next_xs[w] = nx
        next_ys[w] = ny


@nb.njit(cache=True, nogil=True)
def _lanes(first, others, n_points, walkers, burn_in, seed, xs, ys, masks):
    """``walkers`` independent chaos games in float32 lanes advanced together (:func:`_lane_step`),
    each from (0, 0) with its own burn-in; lane w's counter starts at the high 32 bits of
    :func:`walker_state` ``(seed, w)``. Row 0 of ``xs``/``ys`` (``walkers`` entries) holds the
    lanes after the burn-in, row i + 1 their i-th points: point ``i * walkers + w`` is
    ``xs[walkers + i * walkers + w]``, its mask ``masks[i * walkers + w]``. Rows are full: the
    arrays hold ``(rows + 1) * walkers`` entries, ``rows = ceil(n_points / walkers)``; the points
    beyond ``n_points`` are computed and not used."""
    counters = np.empty(walkers, np.uint32)
    for w in range(walkers):
        counters[w] = np.uint32(walker_state(seed, w) >> _S32)
        xs[w] = 0.0
        ys[w] = 0.0
    first_x = xs[:walkers]
    first_y = ys[:walkers]
    for _ in range(burn_in):
        _lane_step(first, others, counters, first_x, first_y, first_x, first_y, masks[:walkers])
    for start in range(0, n_points, walkers):
        end = start + walkers
        _lane_step(first, others, counters, xs[start:end], ys[start:end], xs[end : end + walkers], ys[end : end + walkers], masks[start:end])


def lane_maps(coefficients, thresholds) -> tuple[tuple, tuple]:
    """:func:`_lanes`' maps as Python floats (the lanes round them to float32): map 0's
    coefficients and every other map's ``(threshold, coefficients)``, the 32-bit thresholds
    (:func:`map_thresholds`) rounded to the 16 bits lanes draw, ``(t + 2^15) >> 16``; a code of
    one map gets a second that is never drawn (threshold 2^16 + 1), so every code compiles alike."""
    rows = np.asarray(coefficients, dtype=np.float64).tolist()
    cut = [float((threshold + (1 << 15)) >> 16) for threshold in np.asarray(thresholds, dtype=np.uint64).tolist()]
    others = tuple((cut[m - 1], *rows[m]) for m in range(1, len(rows))) or ((65537.0, *rows[0]),)
    return tuple(rows[0]), others


def trace(coefficients, thresholds, points, walkers, burn_in, seed, patch):
    """The orbit of checked arguments in this thread's scratch arrays: ``(xs, ys, masks, bounds,
    ends_finite)`` for :func:`framing`, point ``i * walkers + w`` walker w's i-th, ``bounds``
    (xmin, xmax, ymin, ymax), ``ends_finite`` whether every walker's last point is finite. One
    walker is :func:`_orbit` (float64, SplitMix64: the reference renderer, the codes table's);
    several are :func:`_lanes` (float32 lanes, lowbias32 counters, 16-bit map thresholds: other
    bytes, the same attractor), their bounds NumPy's SIMD reductions, which return NaN or an
    infinity, so no framing, when any point is not finite."""
    if walkers == 1:
        xs, ys, masks = _scratch(points)
        *bounds, ends_finite = _orbit(coefficients, thresholds, points, burn_in, seed, xs, ys, masks, patch)
        return xs, ys, masks, bounds, ends_finite
    xs, ys, masks = _lane_scratch((-(-points // walkers) + 1) * walkers)
    _lanes(*lane_maps(coefficients, thresholds), points, walkers, burn_in, seed, xs, ys, masks)
    xs = xs[walkers : walkers + points]
    ys = ys[walkers : walkers + points]
    return xs, ys, masks[:points], [float(xs.min()), float(xs.max()), float(ys.min()), float(ys.max())], True


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


def framing(bounds, ends_finite: bool, size: int, margin: int) -> tuple[float, ...] | None:
    """``(xmin, ymin, sx, sy, cx, cy)``: a point's column is ``int((x - xmin) * sx + cx)``, its row
    ``size - 1 - int((y - ymin) * sy + cy)``; ``None`` when the orbit cannot be framed (it renders
    empty).

    A coordinate that is not finite stays so under every affine map (infinity times zero is NaN,
    and NaN never leaves), so finite last points of the walkers (``ends_finite``) mean every
    point is finite; with finite extents and scales every index lies in the image. An orbit that diverges, or stays finite
    but so large (or so thin) that its extent or scale overflows, cannot be framed.
    """
    if not ends_finite or not all(math.isfinite(value) for value in bounds):
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
    ``(row + offset) * stride + col + offset``, ``col = int((x - xmin) * sx + cx)``, ``row = size
    - 1 - int((y - ymin) * sy + cy)``. Both truncations are ``np.trunc`` in float64 (exact, and
    the values are positive, so equal to ``int``) and the index is formed in float64 (integers
    below 2^31, exact) and converted once: LLVM turns the loop into AVX2 rounds and one
    float -> int32 conversion per point, where two conversions and 64-bit integer arithmetic
    cost half as much again. A loop of its own, so it runs in SIMD lanes rather than between
    the random writes."""
    xmin, ymin, sx, sy, cx, cy = frame
    top = float(size - 1 + offset) * stride + offset
    row_step = float(stride)
    for j in range(xs.shape[0]):
        col = np.trunc((xs[j] - xmin) * sx + cx)
        row = np.trunc((ys[j] - ymin) * sy + cy)
        pixels[j] = np.int32(top - row * row_step + col)


@nb.njit(cache=True, nogil=True)
def _draw_points(image, pixels):
    """Grey at every point's pixel (``pixels`` as :func:`_pixel_indices`, no offset), indexed as
    unsigned so the write needs no negative-index wrap."""
    flat = image.ravel()
    grey = np.uint8(FOREGROUND)
    for j in range(pixels.shape[0]):
        flat[np.uint32(pixels[j])] = grey


@nb.njit(cache=True, nogil=True)
def _draw_patches(image, pixels, masks, centres):
    """Each point's 3 x 3 mask ORed into its centre pixel of ``centres`` (the image padded by one
    pixel on every side), then every image pixel set when a neighbour's mask has the bit pointing
    at it: the same pixels as stamping point by point, with one random memory access per point
    instead of nine, and one contiguous pass over the image that needs no border cases."""
    padded = centres.ravel()
    for j in range(pixels.shape[0]):
        padded[np.uint32(pixels[j])] |= masks[j]  # unsigned: no negative-index wrap in the loop
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


def map_thresholds(probabilities: np.ndarray) -> np.ndarray:
    """Cumulative probabilities as 32-bit integer thresholds for map selection."""
    cumulative = np.cumsum(np.asarray(probabilities, dtype=np.float64))
    cumulative /= cumulative[-1]
    return np.minimum(np.round(cumulative * 2.0**32), 2.0**32).astype(np.uint64)


def padded_maps(maps: int) -> int:
    """The count of maps a batch of codes of at most ``maps`` maps is padded to on the device: the
    next power of two (:mod:`fdsml.ifs.render_triton` is compiled for those)."""
    return 1 << (maps - 1).bit_length()


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


def chaos_game(coefficients, probabilities, *, points: int, seed: int, burn_in: int = 20, walkers: int = 1) -> np.ndarray:
    """The orbit itself, ``(points, 2)`` in the code's own coordinates (for inspection and tests);
    with several walkers, point ``i * walkers + w`` is walker w's i-th."""
    coefficients, probabilities = _validated(coefficients, probabilities)
    xs, ys, *_ = trace(coefficients, map_thresholds(probabilities), points, walkers, burn_in, seed, False)
    return np.stack([xs, ys], axis=1).astype(np.float64)


def check_arguments(*, size: int, points: int, seed: int, mode: str, margin: int, burn_in: int, walkers: int) -> None:
    """Refuse rendering arguments no renderer can honour, naming the argument."""
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
    if not 1 <= walkers <= MAX_WALKERS:
        raise ValueError(f"walkers must lie in [1, {MAX_WALKERS}], got {walkers}")


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
    walkers: int = 1,
) -> np.ndarray:
    """Render an IFS code to a ``(size, size)`` uint8 image, zero = background.

    The ``points`` come from ``walkers`` independent orbits iterated together (:func:`trace`):
    one walker is the reference renderer the codes table is built with (float64); several are
    float32 lanes that the CPU advances in SIMD (the same attractor, other samples of it).

    ``mode="point"`` draws one pixel per point; ``mode="patch"`` stamps a random non-empty
    3 x 3 pattern at every point, as FractalDB does. An orbit that cannot be framed (one that
    diverges, or whose extent overflows: :func:`framing`) renders as an empty image.
    """
    check_arguments(size=size, points=points, seed=seed, mode=mode, margin=margin, burn_in=burn_in, walkers=walkers)
    coefficients, probabilities = _validated(coefficients, probabilities)
    return render_thresholds(coefficients, map_thresholds(probabilities), size, points, seed, mode, margin, burn_in, walkers)


def render_thresholds(coefficients, thresholds, size, points, seed, mode, margin, burn_in, walkers) -> np.ndarray:
    """:func:`render` of checked arguments, the map probabilities as :func:`map_thresholds`."""
    patch = mode == "patch"
    xs, ys, masks, bounds, ends_finite = trace(coefficients, thresholds, points, walkers, burn_in, seed, patch)
    frame = framing(bounds, ends_finite, size, margin)
    if frame is None:
        return np.zeros((size, size), dtype=np.uint8)
    pixels, centres = _pixel_scratch(points, size, patch)
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


def _scratch(points: int):
    """This thread's float64 orbit arrays (xs, ys, masks), kept between calls.

    Fresh megabyte-sized arrays come from the kernel as untouched pages, and faulting them in
    cost as much as the chaos game itself; reusing them keeps rendering at the loop's speed.
    """
    orbit = getattr(_SCRATCH, "orbit", None)
    if orbit is None or orbit[0].shape[0] < points:
        orbit = _SCRATCH.orbit = (np.empty(points), np.empty(points), np.empty(points, np.uint16))
    return tuple(array[:points] for array in orbit)


def _lane_scratch(length: int):
    """This thread's float32 lane arrays (xs, ys, masks) of at least ``length`` entries (as :func:`_scratch`)."""
    lanes = getattr(_SCRATCH, "lanes", None)
    if lanes is None or lanes[0].shape[0] < length:
        lanes = _SCRATCH.lanes = (np.empty(length, np.float32), np.empty(length, np.float32), np.empty(length, np.uint16))
    return lanes


def _pixel_scratch(points: int, size: int, patch: bool):
    """This thread's pixel indices and ``centres``, the patch masks' grid: the image padded by one
    pixel on every side (zeroed in patch mode)."""
    pixels = getattr(_SCRATCH, "pixels", None)
    if pixels is None or pixels.shape[0] < points:
        pixels = _SCRATCH.pixels = np.empty(points, np.int32)
    centres = getattr(_SCRATCH, "centres", None)
    if centres is None or centres.shape[0] != size + 2:
        centres = _SCRATCH.centres = np.empty((size + 2, size + 2), np.uint16)
    if patch:
        centres[...] = 0
    return pixels[:points], centres


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
    walkers: int = 1

    def __post_init__(self):
        if self.margin < 1 or self.size < 3 + 2 * self.margin:
            raise ValueError(f"size ({self.size}) and margin ({self.margin}): need margin >= 1 and size >= 3 + 2 * margin")
        if self.points < 1:
            raise ValueError(f"points: must be positive, got {self.points}")
        if self.burn_in < 0:
            raise ValueError(f"burn_in: must be >= 0, got {self.burn_in}")
        if not 1 <= self.walkers <= MAX_WALKERS:
            raise ValueError(f"walkers: must lie in [1, {MAX_WALKERS}], got {self.walkers}")

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
            walkers=self.walkers,
        )
