"""The chaos-game renderer (:mod:`fdsml.ifs.render`) as Triton kernels: a batch of codes rendered
into uint8 images on the device, byte for byte the Numba renderer's for the same walkers.

One program renders one image with its W walkers in the lanes of a block: the same counter-based
streams (:func:`fdsml.ifs.render.walker_state`; with several walkers the float32 lanes' lowbias32
counters), the same floating-point operations in the same order (kernels compiled without fused
multiply-add), the same framing. The orbit runs twice
instead of being stored: a first kernel finds each image's bounds, :func:`fdsml.ifs.render.framing`
is evaluated per image on the host (the bounds copied back, one small transfer per batch), and a
second kernel iterates the same orbit
again and writes every point's pixels (patch mode writes the 3 x 3 pattern's pixels into an image
padded by one pixel; every write stores the same grey level, so the order of writes cannot change
the bytes).

Importing this module imports Triton; ``TRITON_INTERPRET=1`` (set before the import) runs the
kernels on CPU tensors, which is how the tests check the bytes without a GPU.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from fdsml.ifs.render import FOREGROUND, MAX_WALKERS, map_thresholds, padded_maps, _validated, check_arguments, framing

_GREY = tl.constexpr(FOREGROUND)
""":data:`fdsml.ifs.render.FOREGROUND` as a constexpr: a kernel compiled for a GPU may read no other global."""

MAX_MAPS = 64
"""Most maps in a code the kernels take (``fractals.*.n_maps`` lie in [1, 64]); a batch's codes are
padded to a power of two of maps, so the kernels are compiled for 1, 2, 4, ..., 64."""

WALKER_COUNTS = tuple(1 << i for i in range(MAX_WALKERS.bit_length()))
"""The walkers the kernels take: the powers of two up to :data:`fdsml.ifs.render.MAX_WALKERS`."""

MAP_COUNTS = tuple(1 << i for i in range(MAX_MAPS.bit_length()))


@triton.jit
def _splitmix64(z):
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    return z ^ (z >> 31)


@triton.jit
def _lowbias32(c):
    """:func:`fdsml.ifs.render.lowbias32` of 32-bit values held in uint64 (the products reduced modulo 2^32)."""
    h = ((c ^ (c >> 16)) * 0x7FEB352D) & 0xFFFFFFFF
    h = ((h ^ (h >> 15)) * 0x846CA68B) & 0xFFFFFFFF
    return h ^ (h >> 16)


@triton.jit
def _advance(state, LANES: tl.constexpr):
    """The next draw of every lane's stream and its new state: SplitMix64 of the 64-bit state plus a
    golden gamma (one walker, :func:`fdsml.ifs.render._orbit`), or lowbias32 of the 32-bit counter
    plus :data:`fdsml.ifs.render.LANE_GAMMA` (several, :func:`fdsml.ifs.render._lanes`)."""
    if LANES:
        state = (state + 0x9E3779B9) & 0xFFFFFFFF
        return state, _lowbias32(state)
    state = state + 0x9E3779B97F4A7C15
    return state, _splitmix64(state)


@triton.jit
def _step(coefficients, thresholds, image, n_maps, x, y, r, MAX_MAPS: tl.constexpr, LANES: tl.constexpr):
    """One chaos-game step per lane, as :func:`fdsml.ifs.render._step` (map k is the count of
    thresholds at or below the draw's high 32 bits, then ``(a x + b y) + e``, ``(c x + d y) + f``
    in float64) or, with several walkers, as :func:`fdsml.ifs.render._lane_step` (the draw's high 16
    bits against the thresholds rounded to 16 bits, :func:`fdsml.ifs.render.lane_maps`,
    then the same sums in float32)."""
    if LANES:
        pick = (r >> 16).to(tl.int64)
    else:
        pick = (r >> 32).to(tl.int64)
    k = tl.zeros_like(pick)
    for m in tl.static_range(MAX_MAPS - 1):
        threshold = tl.load(thresholds + image * MAX_MAPS + m)
        if LANES:
            threshold = (threshold + 32768) >> 16
        k += ((pick >= threshold) & (m < n_maps - 1)).to(tl.int64)
    row = coefficients + (image * MAX_MAPS + k) * 6
    a = _coefficient(row, 0, LANES)
    b = _coefficient(row, 1, LANES)
    e = _coefficient(row, 4, LANES)
    c = _coefficient(row, 2, LANES)
    d = _coefficient(row, 3, LANES)
    f = _coefficient(row, 5, LANES)
    return a * x + b * y + e, c * x + d * y + f


@triton.jit
def _coefficient(row, column, LANES: tl.constexpr):
    """A map's coefficient: float64, or rounded to float32 in lanes (as NumPy's ``astype``)."""
    value = tl.load(row + column)
    if LANES:
        value = value.to(tl.float32)
    return value


@triton.jit
def _burned_in(coefficients, thresholds, seeds, image, n_maps, burn_in, WALKERS: tl.constexpr, MAX_MAPS: tl.constexpr):
    """Every lane's walker after its burn-in: its stream's state (SplitMix64 of the seed plus
    ``lane + 1`` golden gammas; with several walkers its high 32 bits) and its point, from (0, 0)
    (float32 with several walkers)."""
    lanes = tl.arange(0, WALKERS).to(tl.uint64)
    state = _splitmix64(tl.load(seeds + image).to(tl.uint64) + (lanes + 1) * 0x9E3779B97F4A7C15)
    if WALKERS > 1:
        state = state >> 32
        x = tl.zeros((WALKERS,), tl.float32)
        y = tl.zeros((WALKERS,), tl.float32)
    else:
        x = tl.zeros((WALKERS,), tl.float64)
        y = tl.zeros((WALKERS,), tl.float64)
    for _ in range(burn_in):
        state, r = _advance(state, WALKERS > 1)
        x, y = _step(coefficients, thresholds, image, n_maps, x, y, r, MAX_MAPS, WALKERS > 1)
    return state, x, y


@triton.jit
def _bounds_kernel(coefficients, thresholds, n_maps_per_image, seeds, bounds, n_points, burn_in,
                   WALKERS: tl.constexpr, MAX_MAPS: tl.constexpr):
    """Image ``program_id``'s bounds (xmin, xmax, ymin, ymax) and the finiteness of every walker's
    last point (1.0 or 0.0), into ``bounds[image, 0:5]``."""
    image = tl.program_id(0)
    n_maps = tl.load(n_maps_per_image + image)
    lanes = tl.arange(0, WALKERS)
    state, x, y = _burned_in(coefficients, thresholds, seeds, image, n_maps, burn_in, WALKERS, MAX_MAPS)
    xmin = tl.full((WALKERS,), float("inf"), tl.float64)
    xmax = tl.full((WALKERS,), float("-inf"), tl.float64)
    ymin = tl.full((WALKERS,), float("inf"), tl.float64)
    ymax = tl.full((WALKERS,), float("-inf"), tl.float64)
    for start in range(0, n_points, WALKERS):
        active = start + lanes < n_points
        state, r = _advance(state, WALKERS > 1)
        nx, ny = _step(coefficients, thresholds, image, n_maps, x, y, r, MAX_MAPS, WALKERS > 1)
        x = tl.where(active, nx, x)
        y = tl.where(active, ny, y)
        xmin = tl.where(active, tl.minimum(xmin, nx.to(tl.float64)), xmin)
        xmax = tl.where(active, tl.maximum(xmax, nx.to(tl.float64)), xmax)
        ymin = tl.where(active, tl.minimum(ymin, ny.to(tl.float64)), ymin)
        ymax = tl.where(active, tl.maximum(ymax, ny.to(tl.float64)), ymax)
    x = x.to(tl.float64)
    y = y.to(tl.float64)
    finite = (x == x) & (y == y) & (tl.abs(x) < float("inf")) & (tl.abs(y) < float("inf"))
    finite = finite | (lanes >= n_points)
    out = bounds + image * 5
    tl.store(out, tl.min(xmin, 0))
    tl.store(out + 1, tl.max(xmax, 0))
    tl.store(out + 2, tl.min(ymin, 0))
    tl.store(out + 3, tl.max(ymax, 0))
    tl.store(out + 4, tl.min(finite.to(tl.float64), 0))


@triton.jit
def _draw_kernel(coefficients, thresholds, n_maps_per_image, seeds, frames, images, n_points, burn_in, side,
                 WALKERS: tl.constexpr, MAX_MAPS: tl.constexpr, PATCH: tl.constexpr):
    """Iterate image ``program_id``'s orbit again and write its points into ``images`` (side x side
    each; in patch mode the image padded by one pixel, side = size + 2). ``frames[image]`` is
    (xmin, ymin, sx, sy, cx, cy, drawn) from :func:`fdsml.ifs.render.framing`, drawn 0 for none."""
    image = tl.program_id(0)
    frame = frames + image * 7
    if tl.load(frame + 6) != 0.0:
        xmin = tl.load(frame)
        ymin = tl.load(frame + 1)
        sx = tl.load(frame + 2)
        sy = tl.load(frame + 3)
        cx = tl.load(frame + 4)
        cy = tl.load(frame + 5)
        n_maps = tl.load(n_maps_per_image + image)
        lanes = tl.arange(0, WALKERS)
        state, x, y = _burned_in(coefficients, thresholds, seeds, image, n_maps, burn_in, WALKERS, MAX_MAPS)
        out = images + image.to(tl.int64) * side * side
        size = side - 2 if PATCH else side
        for start in range(0, n_points, WALKERS):
            active = start + lanes < n_points
            state, r = _advance(state, WALKERS > 1)
            x, y = _step(coefficients, thresholds, image, n_maps, x, y, r, MAX_MAPS, WALKERS > 1)
            col = ((x.to(tl.float64) - xmin) * sx + cx).to(tl.int32)
            row = (size - 1) - ((y.to(tl.float64) - ymin) * sy + cy).to(tl.int32)
            if PATCH:
                mask = (((r & 0xFFFF) * 511) >> 16) + 1
                for bit in tl.static_range(9):
                    hit = active & (((mask >> bit) & 1) != 0)
                    pixel = (row + 1 + bit // 3 - 1) * side + col + 1 + bit % 3 - 1
                    tl.store(out + pixel, tl.full((WALKERS,), _GREY, tl.uint8), mask=hit)
            else:
                tl.store(out + row * side + col, tl.full((WALKERS,), _GREY, tl.uint8), mask=active)


def render_batch(
    codes,
    probabilities,
    seeds,
    *,
    size: int,
    points: int,
    mode: str = "patch",
    margin: int = 2,
    burn_in: int = 20,
    walkers: int = 1,
    device: str | torch.device = "cuda",
) -> torch.Tensor:
    """Render ``len(codes)`` IFS codes into a ``(B, size, size)`` uint8 tensor on ``device``: image i
    is ``fdsml.ifs.render.render(codes[i], probabilities[i], seed=seeds[i], ...)``, byte for byte.
    ``walkers`` must be a power of two (the lanes of a block)."""
    seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
    if len(codes) != seeds.size:
        raise ValueError(f"codes and seeds differ in length: {len(codes)} and {seeds.size}")
    if not seeds.size:
        return torch.zeros((0, size, size), dtype=torch.uint8, device=device)
    tensors = (torch.as_tensor(array, device=device) for array in (*packed_codes(codes, probabilities), seeds))
    return render_tensors(*tensors, size=size, points=points, mode=mode, margin=margin, burn_in=burn_in, walkers=walkers)


def render_tensors(coefficients, thresholds, n_maps, seeds, *, size, points, mode, margin, burn_in, walkers) -> torch.Tensor:
    """:func:`render_batch` of codes already packed (:func:`packed_codes`) and on the device, with
    int64 ``seeds``: the images on the same device."""
    for seed in (int(seeds.min()), int(seeds.max())):
        check_arguments(size=size, points=points, seed=seed, mode=mode, margin=margin, burn_in=burn_in, walkers=walkers)
    if walkers & (walkers - 1):
        raise ValueError(f"walkers must be a power of two for the Triton renderer, got {walkers}")
    batch, max_maps = thresholds.shape
    if max_maps not in MAP_COUNTS:
        raise ValueError(f"codes must be padded to a power of two of maps up to {MAX_MAPS}, got {max_maps}")
    patch = mode == "patch"
    side = size + 2 if patch else size
    images = torch.zeros((batch, side, side), dtype=torch.uint8, device=seeds.device)
    bounds = torch.empty((batch, 5), dtype=torch.float64, device=seeds.device)
    _bounds_kernel[(batch,)](
        coefficients, thresholds, n_maps, seeds, bounds, points, burn_in, WALKERS=walkers, MAX_MAPS=max_maps, **launch_options(walkers)
    )
    frames = torch.as_tensor(_frames(bounds.cpu().numpy(), size, margin), device=seeds.device)
    _draw_kernel[(batch,)](
        coefficients, thresholds, n_maps, seeds, frames, images, points, burn_in, side,
        WALKERS=walkers, MAX_MAPS=max_maps, PATCH=patch, **launch_options(walkers),
    )
    return images[:, 1:-1, 1:-1].contiguous() if patch else images


def launch_options(walkers: int) -> dict:
    """Compiler options of a launch with ``walkers`` lanes: no fused multiply-add (the Numba renderer
    rounds every product and sum), and one warp per 32 lanes (from 1 to 8)."""
    return {"enable_fp_fusion": False, "num_warps": min(max(walkers // 32, 1), 8)}


_POINTERS = {"coefficients": "*fp64", "thresholds": "*i64", "n_maps_per_image": "*i64", "seeds": "*i64"}
_SIGNATURES = {
    "_bounds_kernel": {**_POINTERS, "bounds": "*fp64", "n_points": "i32", "burn_in": "i32"},
    "_draw_kernel": {**_POINTERS, "frames": "*fp64", "images": "*u8", "n_points": "i32", "burn_in": "i32", "side": "i32"},
}


def specialisations() -> list[tuple]:
    """``(kernel, signature, constexprs, options)`` covering what :func:`render_tensors` can launch,
    for compiling without a GPU (``triton.compile``): every walker count in both modes at 4 maps
    (the lane layout and the warps follow the walkers), and the fewest and most maps (the unrolled
    map selection: 1 and :data:`MAX_MAPS`) with one walker and with 64 lanes. The map counts between
    unroll the same code; the full product takes minutes, too long for every test run."""
    combinations = {(w, 4, patch) for w in WALKER_COUNTS for patch in (True, False)}
    combinations |= {(w, m, True) for w in (1, 64) for m in (1, MAX_MAPS)}
    kernels = []
    for walkers, maps, patch in sorted(combinations):
        constexprs = {"WALKERS": walkers, "MAX_MAPS": maps}
        options = launch_options(walkers)
        draw = {**_SIGNATURES["_draw_kernel"], "WALKERS": "constexpr", "MAX_MAPS": "constexpr", "PATCH": "constexpr"}
        kernels.append((_draw_kernel, draw, {**constexprs, "PATCH": patch}, options))
        if patch:
            bounds = {**_SIGNATURES["_bounds_kernel"], "WALKERS": "constexpr", "MAX_MAPS": "constexpr"}
            kernels.append((_bounds_kernel, bounds, constexprs, options))
    return kernels


def packed_codes(codes, probabilities) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batch's codes padded to a power-of-two count of maps: coefficients ``(B, M, 6)``, integer
    thresholds ``(B, M)`` (:func:`fdsml.ifs.render.map_thresholds`) and each code's count of maps."""
    if len(codes) != len(probabilities):
        raise ValueError(f"codes and probabilities differ in length: {len(codes)} and {len(probabilities)}")
    validated = [_validated(c, p) for c, p in zip(codes, probabilities)]
    max_maps = padded_maps(max(c.shape[0] for c, _ in validated))
    coefficients = np.zeros((len(validated), max_maps, 6))
    thresholds = np.zeros((len(validated), max_maps), np.int64)
    n_maps = np.array([c.shape[0] for c, _ in validated], np.int64)
    for i, (c, p) in enumerate(validated):
        coefficients[i, : c.shape[0]] = c
        thresholds[i, : c.shape[0]] = map_thresholds(p)
    return coefficients, thresholds, n_maps


def _frames(bounds: np.ndarray, size: int, margin: int) -> np.ndarray:
    """Each image's :func:`fdsml.ifs.render.framing` as ``(xmin, ymin, sx, sy, cx, cy, drawn)``."""
    frames = np.zeros((bounds.shape[0], 7))
    for i, row in enumerate(bounds.tolist()):
        frame = framing(row[:4], row[4] == 1.0, size, margin)
        if frame is not None:
            frames[i] = (*frame, 1.0)
    return frames
