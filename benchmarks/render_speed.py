"""Rendering speed of a formula family on one thread, in images/s.

    python benchmarks/render_speed.py --size 256 --points 100000 --images 100 --mode patch --walkers 1,2,4,8,16 --json
    python benchmarks/render_speed.py --family visual_atom --images 200 --reference-images 10 --json
    python benchmarks/render_speed.py --family rcdb --images 500 --reference-images 40 --json

FineFractalDB (``fdsml.ifs.render``, the default) renders the same codes with each ``--walkers``
count (interleaved orbits), the counts interleaved over ``--rounds`` rounds, and prints images/s,
ns per point and the ratio to the first count, all in CPU time of the rendering thread, with the
share of each pass (orbit, framing, drawing); it also times a bare chaos-game loop (one serial
chain, nothing stored), the floor of a single orbit.

VisualAtom and RCDB render instances drawn with the original ranges at ``--size`` (512, the
original scripts' default) and at 224 px, and time two PIL references of ours on the first
``--reference-images`` of the same instances at ``--size``, in the same run:
``pil_per_segment`` has the original scripts' structure (a Python loop over the vertices of every
orbit, one ``ImageDraw.line`` per segment) but computes the noise with NumPy, so it is a lower
bound on their cost; ``pil_per_orbit`` is a lean PIL renderer (NumPy vertices, one
``ImageDraw.line`` per orbit). The ratios are our images/s over theirs.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numba as nb  # noqa: E402
import numpy as np  # noqa: E402

from PIL import Image, ImageDraw  # noqa: E402

from fdsml.families import get_family  # noqa: E402
from fdsml.families.orbits import REFERENCE_SIZE  # noqa: E402
from fdsml.families.perlin import perlin_curve  # noqa: E402
from fdsml.ifs import determinant_probabilities, render, sample_sigma_factor_code  # noqa: E402
from fdsml.ifs.render import _draw_patches, _draw_points, _pixel_indices, _pixel_scratch, framing, map_thresholds, trace  # noqa: E402

SMALL_SIZE = 224
"""The loader's image size the orbit families are also timed at."""


@nb.njit(cache=True)
def _bare_chaos_game(coefficients, cumulative, n_points, seed):
    """The floor: the orbit's serial dependency chain with a cheap inline generator, nothing stored."""
    state = np.uint64(seed) | np.uint64(1)
    x = 0.0
    y = 0.0
    total = 0.0
    last = coefficients.shape[0] - 1
    for _ in range(n_points):
        state ^= state << np.uint64(13)
        state ^= state >> np.uint64(7)
        state ^= state << np.uint64(17)
        pick = state >> np.uint64(32)
        k = 0
        for m in range(last):
            k += pick >= cumulative[m]
        nx = coefficients[k, 0] * x + coefficients[k, 1] * y + coefficients[k, 4]
        y = coefficients[k, 2] * x + coefficients[k, 3] * y + coefficients[k, 5]
        x = nx
        total += x
    return total


def _render_passes(code, p, args, walkers: int, seed: int) -> tuple[float, float, float]:
    """CPU seconds of ``render``'s three passes on one image: the orbit, the framing into pixel
    indices, the drawing (the random writes and, in patch mode, the 3 x 3 pass)."""
    patch = args.mode == "patch"
    started = time.thread_time()
    xs, ys, masks, bounds, ends_finite = trace(code, map_thresholds(p), args.points, walkers, 20, seed, patch)
    orbit = time.thread_time()
    frame = framing(bounds, ends_finite, args.size, 2)
    pixels, centres = _pixel_scratch(args.points, args.size, patch)
    image = np.zeros((args.size, args.size), np.uint8)
    stride, offset = (args.size + 2, 1) if patch else (args.size, 0)
    _pixel_indices(xs, ys, frame, args.size, stride, offset, pixels)
    framed = time.thread_time()
    _draw_patches(image, pixels, masks, centres) if patch else _draw_points(image, pixels)
    return orbit - started, framed - orbit, time.thread_time() - framed


def fractal_speed(args) -> dict:
    """FineFractalDB: images/s and ns per point for each walker count, in CPU time of this thread,
    the counts interleaved over ``--rounds`` rounds (this machine's speed swings within a minute);
    the share of each pass; the bare chaos game, the floor one serial chain pays."""
    rng = np.random.default_rng(args.seed)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(args.images)]
    probabilities = [determinant_probabilities(code) for code in codes]
    thresholds = [(np.cumsum(p) * 2.0**32).astype(np.uint64) for p in probabilities]
    walker_counts = [int(w) for w in args.walkers.split(",")]
    for walkers in walker_counts:  # compile: the lanes once per count of maps
        for code, p in {code.shape[0]: (code, p) for code, p in zip(codes, probabilities)}.values():
            render(code, p, size=args.size, points=1000, seed=0, mode=args.mode, walkers=walkers)
        _render_passes(codes[0], probabilities[0], args, walkers, 0)
    _bare_chaos_game(codes[0], thresholds[0], 10, 1)

    seconds = {w: 0.0 for w in walker_counts}
    passes = {w: np.zeros(3) for w in walker_counts}
    floor_seconds = 0.0
    for _ in range(args.rounds):
        for walkers in walker_counts:
            started = time.thread_time()
            for i, (code, p) in enumerate(zip(codes, probabilities)):
                render(code, p, size=args.size, points=args.points, seed=i, mode=args.mode, walkers=walkers)
            seconds[walkers] += time.thread_time() - started
            for i, (code, p) in enumerate(zip(codes, probabilities)):
                passes[walkers] += _render_passes(code, p, args, walkers, i)
        started = time.thread_time()
        for i, (code, t) in enumerate(zip(codes, thresholds)):
            _bare_chaos_game(code, t, args.points, i + 1)
        floor_seconds += time.thread_time() - started

    images = args.images * args.rounds
    total_points = images * args.points
    rows = []
    for walkers in walker_counts:
        share = passes[walkers] / passes[walkers].sum()
        rows.append(
            {
                "walkers": walkers,
                "images_per_s": round(images / seconds[walkers], 1),
                "ns_per_point": round(1e9 * seconds[walkers] / total_points, 3),
                "ratio_to_one_walker": round(seconds[walker_counts[0]] / seconds[walkers], 2),
                "share_orbit": round(float(share[0]), 3),
                "share_framing": round(float(share[1]), 3),
                "share_drawing": round(float(share[2]), 3),
                "orbit_ns_per_point": round(1e9 * passes[walkers][0] / total_points, 3),
            }
        )
    return {
        "family": "finefractaldb",
        "mode": args.mode,
        "size": args.size,
        "points": args.points,
        "images": args.images,
        "rounds": args.rounds,
        "clock": "CPU time of the rendering thread",
        "floor_ns_per_point": round(1e9 * floor_seconds / total_points, 3),
        "walkers": rows,
    }


def _orbit_vertices(instance, gain: float, cells: int, seed: int):
    """The reference's vertex positions, orbit after orbit (the geometry of fdsml.families.orbits)."""
    theta = 2 * np.pi * np.arange(instance.vertices) / instance.vertices
    cos, sin = np.cos(theta), np.sin(theta)
    wave = 0.5 * np.sin(getattr(instance, "n1", 0) * theta) + 0.5 * np.sin(getattr(instance, "n2", 0) * theta)
    x = instance.centre_x + instance.radius * instance.oval_x * cos
    y = instance.centre_y + instance.radius * instance.oval_y * sin
    t = cells * theta / (2 * np.pi)
    for k in range(instance.orbits):
        step_x = instance.amplitude * (1 - gain * perlin_curve(seed, 2 * k, cells, t)) + wave + instance.line_width
        step_y = instance.amplitude * (1 - gain * perlin_curve(seed, 2 * k + 1, cells, t)) + wave + instance.line_width
        yield k, cos, sin, step_x, step_y, x, y
        x = x + cos * step_x
        y = y + sin * step_y


def pil_per_segment(instance, style, cells: int, size: int, seed: int):
    """The original scripts' structure: per orbit, a Python loop moves each vertex, then one line per segment."""
    image = Image.new("L", (size, size), style.background)
    draw = ImageDraw.Draw(image)
    scale = size / REFERENCE_SIZE
    greys = np.random.default_rng(seed).integers(style.greys[0], style.greys[1] + 1, size=instance.orbits)
    x, y = None, None
    for k, cos, sin, step_x, step_y, x0, y0 in _orbit_vertices(instance, style.noise_gain, cells, seed):
        if x is None:
            x, y = x0.tolist(), y0.tolist()
        for v in range(instance.vertices):
            x[v] += cos[v] * step_x[v]
            y[v] += sin[v] * step_y[v]
        grey = int(greys[k])
        for v in range(instance.vertices):
            w = (v + 1) % instance.vertices
            draw.line((x[v] * scale, y[v] * scale, x[w] * scale, y[w] * scale), fill=grey, width=1)
    return image


def pil_per_orbit(instance, style, cells: int, size: int, seed: int):
    """A lean PIL renderer: NumPy vertices, one ImageDraw.line call per orbit."""
    image = Image.new("L", (size, size), style.background)
    draw = ImageDraw.Draw(image)
    scale = size / REFERENCE_SIZE
    greys = np.random.default_rng(seed).integers(style.greys[0], style.greys[1] + 1, size=instance.orbits)
    for k, cos, sin, step_x, step_y, x, y in _orbit_vertices(instance, style.noise_gain, cells, seed):
        px = (x + cos * step_x) * scale
        py = (y + sin * step_y) * scale
        points = np.stack([np.append(px, px[0]), np.append(py, py[0])], axis=1).ravel().tolist()
        draw.line(points, fill=int(greys[k]), width=1)
    return image


def _images_per_second(render, instances) -> float:
    """Images per second of this process's CPU time (one thread), so other load on the machine counts less."""
    started = time.process_time()
    for i, instance in enumerate(instances):
        render(instance, i)
    return len(instances) / (time.process_time() - started)


def orbit_speed(args) -> dict:
    """VisualAtom or RCDB: images/s at --size and 224 px, and against the PIL references at --size."""
    family = get_family(args.family)
    settings = family.settings_type()
    rng = np.random.default_rng(args.seed)
    instances = [family.perturb(family.sample_class(rng, settings, Counter()), rng, settings) for _ in range(args.images)]
    size = args.size or REFERENCE_SIZE
    family.render(instances[0], settings, 0, size)  # compile
    ours = _images_per_second(lambda instance, seed: family.render(instance, settings, seed, size), instances)
    small = _images_per_second(lambda instance, seed: family.render(instance, settings, seed, SMALL_SIZE), instances)
    reference = instances[: args.reference_images]
    ours_on_reference = _images_per_second(lambda instance, seed: family.render(instance, settings, seed, size), reference)
    result = {
        "family": args.family,
        "size": size,
        "images": args.images,
        "images_per_s": round(ours, 1),
        f"images_per_s_at_{SMALL_SIZE}": round(small, 1),
        "mean_vertices_x_orbits": round(float(np.mean([i.vertices * i.orbits for i in instances])), 1),
        "reference_images": len(reference),
        "images_per_s_on_reference_images": round(ours_on_reference, 1),
    }
    for name, renderer in (("pil_per_segment", pil_per_segment), ("pil_per_orbit", pil_per_orbit)):
        theirs = _images_per_second(
            lambda instance, seed: renderer(instance, family.style, settings.noise_cells, size, seed), reference
        )
        result[f"{name}_images_per_s"] = round(theirs, 2)
        result[f"ratio_to_{name}"] = round(ours_on_reference / theirs, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=("finefractaldb", "visual_atom", "rcdb"), default="finefractaldb")
    parser.add_argument("--size", type=int, default=None, help="image side (default: 256 for fractals, 512 otherwise)")
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--reference-images", type=int, default=10, help="instances the PIL references render")
    parser.add_argument("--mode", choices=("point", "patch"), default="patch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--walkers", default="1,2,4,8,16", help="FineFractalDB: walker counts, the first the baseline of the ratios")
    parser.add_argument("--rounds", type=int, default=3, help="FineFractalDB: interleaved rounds over the walker counts")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    if args.family == "finefractaldb":
        args.size = args.size or 256
        result = fractal_speed(args)
    else:
        result = orbit_speed(args)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
