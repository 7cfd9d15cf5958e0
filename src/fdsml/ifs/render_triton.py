"""The chaos-game renderer (:mod:`fdsml.ifs.render`) as a Triton kernel: a batch of codes rendered
into uint8 images on the device, byte for byte the Numba renderer's for the same walkers.

One program renders one image with its W walkers in the lanes of a block (one warp per 32 lanes):
the same counter-based streams (:func:`fdsml.ifs.render.walker_state`; with several walkers the
float32 lanes' lowbias32 counters, in uint32), the same floating-point operations in the same
order (compiled without fused multiply-add), the same framing. The image's thresholds and
coefficients are loaded once into registers. The orbit runs twice instead of being stored, both
passes in the program that owns the image: the first finds the bounds, the framing
(:func:`fdsml.ifs.render.framing`) is computed there, and the second iterates the same orbit
again and writes every point's pixels (patch mode writes the 3 x 3 pattern's pixels into an image
padded by one pixel; every write stores the same grey level, so the order of writes cannot change
the bytes). A batch is one launch, and nothing is read back to the host.

Importing this module imports Triton; ``TRITON_INTERPRET=1`` (set before the import) runs the
kernels on CPU tensors, which is how the tests check the bytes without a GPU.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from fdsml.ifs.render import FOREGROUND, MAX_WALKERS, map_thresholds, padded_maps, _validated, check_arguments

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
    """:func:`fdsml.ifs.render.lowbias32` in uint32 arithmetic (the products wrap modulo 2^32)."""
    h = (c ^ (c >> 16)) * 0x7FEB352D
    h = (h ^ (h >> 15)) * 0x846CA68B
    return h ^ (h >> 16)


@triton.jit
def _advance(state, LANES: tl.constexpr):
    """The next draw of every lane's stream and its new state: SplitMix64 of the 64-bit state plus a
    golden gamma (one walker, :func:`fdsml.ifs.render._orbit`), or lowbias32 of the uint32 counter
    plus :data:`fdsml.ifs.render.LANE_GAMMA` (several, :func:`fdsml.ifs.render._lanes`)."""
    if LANES:
        state = state + 0x9E3779B9
        r = _lowbias32(state)
    else:
        state = state + 0x9E3779B97F4A7C15
        r = _splitmix64(state)
    return state, r


@triton.jit
def _image_maps(coefficients, thresholds, image, n_maps, MAX_MAPS: tl.constexpr, LANES: tl.constexpr):
    """Image ``image``'s maps, loaded once: its thresholds (with several walkers rounded to the 16
    bits lanes draw, :func:`fdsml.ifs.render.lane_maps`; the padding maps' and the last map's set
    above every draw, so a map's index is the count of thresholds at or below the draw) and its
    coefficients, one ``(MAX_MAPS,)`` vector per column (float64, or float32 in lanes as NumPy's
    ``astype``)."""
    maps = tl.arange(0, MAX_MAPS)
    base = image.to(tl.int64) * MAX_MAPS + maps
    threshold = tl.load(thresholds + base)
    if LANES:
        threshold = (threshold + 32768) >> 16
    threshold = tl.where(maps < n_maps - 1, threshold, 1 << 40)
    row = coefficients + base * 6
    return (threshold, _column(row, 0, LANES), _column(row, 1, LANES), _column(row, 2, LANES), _column(row, 3, LANES),
            _column(row, 4, LANES), _column(row, 5, LANES))


@triton.jit
def _column(row, column, LANES: tl.constexpr):
    """One coefficient of every map: float64, or rounded to float32 in lanes (as NumPy's ``astype``)."""
    value = tl.load(row + column)
    if LANES:
        value = value.to(tl.float32)
    return value


@triton.jit
def _step(maps, x, y, r, LANES: tl.constexpr):
    """One chaos-game step per lane, as :func:`fdsml.ifs.render._step` (map k is the count of
    thresholds at or below the draw's high 32 bits, then ``(a x + b y) + e``, ``(c x + d y) + f``
    in float64) or, with several walkers, as :func:`fdsml.ifs.render._lane_step` (the draw's high 16
    bits against the 16-bit thresholds, then the same sums in float32); ``maps`` from :func:`_image_maps`."""
    threshold, a, b, c, d, e, f = maps
    if LANES:
        pick = (r >> 16).to(tl.int64)
    else:
        pick = (r >> 32).to(tl.int64)
    k = tl.sum((pick[:, None] >= threshold[None, :]).to(tl.int32), axis=1)
    return (tl.gather(a, k, 0) * x + tl.gather(b, k, 0) * y + tl.gather(e, k, 0),
            tl.gather(c, k, 0) * x + tl.gather(d, k, 0) * y + tl.gather(f, k, 0))


@triton.jit
def _burned_in(maps, seed, burn_in, WALKERS: tl.constexpr):
    """Every lane's walker after its burn-in: its stream's state (SplitMix64 of the seed plus
    ``lane + 1`` golden gammas; with several walkers its high 32 bits as uint32) and its point, from
    (0, 0) (float32 with several walkers)."""
    lanes = tl.arange(0, WALKERS).to(tl.uint64)
    state = _splitmix64(seed + (lanes + 1) * 0x9E3779B97F4A7C15)
    if WALKERS > 1:
        state = (state >> 32).to(tl.uint32)
        x = tl.zeros((WALKERS,), tl.float32)
        y = tl.zeros((WALKERS,), tl.float32)
    else:
        x = tl.zeros((WALKERS,), tl.float64)
        y = tl.zeros((WALKERS,), tl.float64)
    for _ in range(burn_in):
        state, r = _advance(state, WALKERS > 1)
        x, y = _step(maps, x, y, r, WALKERS > 1)
    return state, x, y


@triton.jit
def _bounds(maps, seed, n_points, burn_in, WALKERS: tl.constexpr):
    """The orbit's bounds (xmin, xmax, ymin, ymax) and whether every walker's last point is finite."""
    lanes = tl.arange(0, WALKERS)
    state, x, y = _burned_in(maps, seed, burn_in, WALKERS)
    xmin = tl.full((WALKERS,), float("inf"), tl.float64)
    xmax = tl.full((WALKERS,), float("-inf"), tl.float64)
    ymin = tl.full((WALKERS,), float("inf"), tl.float64)
    ymax = tl.full((WALKERS,), float("-inf"), tl.float64)
    for start in range(0, n_points, WALKERS):
        active = start + lanes < n_points
        state, r = _advance(state, WALKERS > 1)
        nx, ny = _step(maps, x, y, r, WALKERS > 1)
        x = tl.where(active, nx, x)
        y = tl.where(active, ny, y)
        xmin = tl.where(active, tl.minimum(xmin, nx.to(tl.float64)), xmin)
        xmax = tl.where(active, tl.maximum(xmax, nx.to(tl.float64)), xmax)
        ymin = tl.where(active, tl.minimum(ymin, ny.to(tl.float64)), ymin)
        ymax = tl.where(active, tl.maximum(ymax, ny.to(tl.float64)), ymax)
    x = x.to(tl.float64)
    y = y.to(tl.float64)
    finite = ((x == x) & (y == y) & (tl.abs(x) < float("inf")) & (tl.abs(y) < float("inf"))) | (lanes >= n_points)
    return tl.min(xmin, 0), tl.max(xmax, 0), tl.min(ymin, 0), tl.max(ymax, 0), tl.min(finite.to(tl.int32), 0) != 0


@triton.jit
def _axis_framing(low, high, size, margin):
    """:func:`fdsml.ifs.render._axis_framing` on the device: (scale, offset, whether it can be framed)."""
    span = high - low
    degenerate = span == 0.0
    scale = (size - 1 - 2 * margin).to(tl.float64) / tl.where(degenerate, 1.0, span)
    offset = tl.where(degenerate, (size // 2).to(tl.float64) + 0.5, margin.to(tl.float64) + 0.5)
    framed = (tl.abs(span) < float("inf")) & (degenerate | (tl.abs(scale) < float("inf")))
    return tl.where(degenerate, 0.0, scale), offset, framed


@triton.jit(do_not_specialize=["n_points", "burn_in", "size", "margin", "side"])  # an int of 1 would become a constexpr
def _render_kernel(coefficients, thresholds, n_maps_per_image, seeds, images, n_points, burn_in, size, margin, side,
                   WALKERS: tl.constexpr, MAX_MAPS: tl.constexpr, PATCH: tl.constexpr):
    """Render image ``program_id`` into ``images`` (side x side each; in patch mode padded by one pixel,
    side = size + 2): the orbit's bounds, its framing (:func:`fdsml.ifs.render.framing`) and, when it
    can be framed, the same orbit again with every point's pixels written. Nothing leaves the program."""
    image = tl.program_id(0)
    maps = _image_maps(coefficients, thresholds, image, tl.load(n_maps_per_image + image), MAX_MAPS, WALKERS > 1)
    seed = tl.load(seeds + image).to(tl.uint64)
    xmin, xmax, ymin, ymax, ends_finite = _bounds(maps, seed, n_points, burn_in, WALKERS)
    sx, cx, x_framed = _axis_framing(xmin, xmax, size, margin)
    sy, cy, y_framed = _axis_framing(ymin, ymax, size, margin)
    if ends_finite & x_framed & y_framed:
        lanes = tl.arange(0, WALKERS)
        state, x, y = _burned_in(maps, seed, burn_in, WALKERS)
        out = images + image.to(tl.int64) * side * side
        for start in range(0, n_points, WALKERS):
            active = start + lanes < n_points
            state, r = _advance(state, WALKERS > 1)
            x, y = _step(maps, x, y, r, WALKERS > 1)
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
    for seed in (int(seeds.min()), int(seeds.max())):  # on the host, before the codes go to the device
        check_arguments(size=size, points=points, seed=seed, mode=mode, margin=margin, burn_in=burn_in, walkers=walkers)
    tensors = (torch.as_tensor(array, device=device) for array in (*packed_codes(codes, probabilities), seeds))
    return render_tensors(*tensors, size=size, points=points, mode=mode, margin=margin, burn_in=burn_in, walkers=walkers)


def render_tensors(coefficients, thresholds, n_maps, seeds, *, size, points, mode, margin, burn_in, walkers) -> torch.Tensor:
    """:func:`render_batch` of codes already packed (:func:`packed_codes`) and on the device, with
    int64 ``seeds`` in [0, 2^63) (checked where they are made): the images on the same device. One
    kernel launch and nothing read back, so the host never waits for the device here."""
    check_arguments(size=size, points=points, seed=0, mode=mode, margin=margin, burn_in=burn_in, walkers=walkers)
    if walkers & (walkers - 1):
        raise ValueError(f"walkers must be a power of two for the Triton renderer, got {walkers}")
    batch, max_maps = thresholds.shape
    if max_maps not in MAP_COUNTS:
        raise ValueError(f"codes must be padded to a power of two of maps up to {MAX_MAPS}, got {max_maps}")
    patch = mode == "patch"
    side = size + 2 if patch else size
    images = torch.zeros((batch, side, side), dtype=torch.uint8, device=seeds.device)
    _render_kernel[(batch,)](
        coefficients, thresholds, n_maps, seeds, images, points, burn_in, size, margin, side,
        WALKERS=walkers, MAX_MAPS=max_maps, PATCH=patch, **launch_options(walkers),
    )
    return images[:, 1:-1, 1:-1].contiguous() if patch else images


def launch_options(walkers: int) -> dict:
    """Compiler options of a launch with ``walkers`` lanes: no fused multiply-add (the Numba renderer
    rounds every product and sum), and one warp per 32 lanes (from 1 to 8)."""
    return {"enable_fp_fusion": False, "num_warps": min(max(walkers // 32, 1), 8)}


_SIGNATURE = {
    "coefficients": "*fp64", "thresholds": "*i64", "n_maps_per_image": "*i64", "seeds": "*i64", "images": "*u8",
    "n_points": "i32", "burn_in": "i32", "size": "i32", "margin": "i32", "side": "i32",
    "WALKERS": "constexpr", "MAX_MAPS": "constexpr", "PATCH": "constexpr",
}


def specialisations() -> list[tuple]:
    """``(kernel, signature, constexprs, options)`` covering what :func:`render_tensors` can launch,
    for compiling without a GPU (``triton.compile``): every walker count in patch mode at 4 maps
    (the lane layout and the warps follow the walkers), point mode (its store alone differs) at
    1, 32 and 1,024 walkers, and the fewest and most maps (1 and :data:`MAX_MAPS`) with one walker
    and with 64 lanes. The map counts between select a map the same way; the full product (154)
    takes minutes, too long for every test run."""
    combinations = {(w, 4, True) for w in WALKER_COUNTS} | {(w, 4, False) for w in (1, 32, MAX_WALKERS)}
    combinations |= {(w, m, True) for w in (1, 64) for m in (1, MAX_MAPS)}
    return [
        (_render_kernel, _SIGNATURE, {"WALKERS": walkers, "MAX_MAPS": maps, "PATCH": patch}, launch_options(walkers))
        for walkers, maps, patch in sorted(combinations)
    ]


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
