"""Rendering speed of a formula family on one thread, in images/s.

    python benchmarks/render_speed.py --size 256 --points 100000 --images 100 --mode patch --walkers 1,2,4,8,16 --json
    git show main:src/fdsml/ifs/render.py > /tmp/render_main.py
    python benchmarks/render_speed.py --walkers 1,128 --compare /tmp/render_main.py --json
    python benchmarks/render_speed.py --family visual_atom --images 200 --reference-images 10 --json
    python benchmarks/render_speed.py --family rcdb --images 500 --reference-images 40 --json
    python benchmarks/render_speed.py --generate --classes 100 --instances 1000 --workers 2   # a table, extrapolated

FineFractalDB (``fdsml.ifs.render``, the default) renders the same codes with each ``--walkers`` count (interleaved
orbits), the counts interleaved over ``--rounds`` rounds, and prints images/s, ns per point and the ratio to the
first count, all in CPU time of the rendering thread, with the share and ns per point of each pass (orbit, framing,
drawing); it also times a bare chaos-game loop (one serial chain, nothing stored), the floor of a single orbit.
``--compare FILE`` loads another version of ``fdsml/ifs/render.py`` (e.g. main's) beside this one and times it in the
same rounds, so the rows of both and this one's speed-up over it come from one run; it also checks that both draw the
same bytes.

VisualAtom and RCDB render instances drawn with the original ranges at ``--size`` (512, the original scripts'
default) and at 224 px, and time two PIL references of ours on the first ``--reference-images`` of the same instances
at ``--size``, in the same run: ``pil_per_segment`` has the original scripts' structure (a Python loop over the
vertices of every orbit, one ``ImageDraw.line`` per segment) but computes the noise with NumPy, so it is a lower
bound on their cost; ``pil_per_orbit`` is a lean PIL renderer (NumPy vertices, one ``ImageDraw.line`` per orbit). The
ratios are our images/s over theirs.

``--generate`` times FineFractalDB's generation (class filter, perturbations, occupancy renderings) of ``--classes``
x ``--instances`` at ``--size`` / ``--points`` on ``--workers`` processes; every class costs the same on average, so
it scales linearly to ``--full-classes``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections import Counter
import os
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numba as nb  # noqa: E402
import numpy as np  # noqa: E402

from PIL import Image, ImageDraw  # noqa: E402

from fdsml.families import get_family  # noqa: E402
from fdsml.families.finefractaldb import generate_finefractaldb  # noqa: E402
from fdsml.families.orbits import REFERENCE_SIZE  # noqa: E402
from fdsml.families.perlin import perlin_curve  # noqa: E402
from fdsml.ifs import RenderSettings, determinant_probabilities, render, sample_sigma_factor_code  # noqa: E402
from fdsml.ifs.finefractaldb import FineFractalDBConfig  # noqa: E402
from timing import interleaved, parser, print_result  # noqa: E402

SMALL_SIZE = 224
"""The loader's image size the orbit families are also timed at."""

PASSES = ("orbit", "framing", "drawing")
"""A rendering's passes, timed one by one."""


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


def _renderer(path: str | None):
    """``fdsml.ifs.render`` itself (``path`` None) or another version of its file, loaded as a module of its own."""
    if path is None:
        return importlib.import_module("fdsml.ifs.render")
    spec = importlib.util.spec_from_file_location("compared_render", path)
    if spec is None or not os.path.isfile(path):
        raise SystemExit(f"--compare: {path} is not a Python file (e.g. git show main:src/fdsml/ifs/render.py > /tmp/render_main.py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _render_passes(renderer, code, p, args, walkers: int, seed: int) -> tuple[float, float, float]:
    """CPU seconds of ``renderer.render``'s three passes on one image: the orbit (with its
    extent), the framing into pixel indices, the drawing (the random writes and, in patch mode,
    the 3 x 3 pass)."""
    patch = args.mode == "patch"
    started = time.thread_time()
    xs, ys, masks, bounds, ends_finite = renderer.trace(code, renderer.map_thresholds(p), args.points, walkers, 20, seed, patch)
    orbit = time.thread_time()
    frame = renderer.framing(bounds, ends_finite, args.size, 2)
    pixels, centres = renderer._pixel_scratch(args.points, args.size, patch)
    image = np.zeros((args.size, args.size), np.uint8)
    stride, offset = (args.size + 2, 1) if patch else (args.size, 0)
    renderer._pixel_indices(xs, ys, frame, args.size, stride, offset, pixels)
    framed = time.thread_time()
    renderer._draw_patches(image, pixels, masks, centres) if patch else renderer._draw_points(image, pixels)
    return orbit - started, framed - orbit, time.thread_time() - framed


def _time_renderer(renderer, codes, probabilities, args, walkers: int) -> tuple[float, np.ndarray]:
    """One round of one renderer at one walker count: CPU seconds of the whole renderings, then of each pass."""
    started = time.thread_time()
    for i, (code, p) in enumerate(zip(codes, probabilities)):
        renderer.render(code, p, size=args.size, points=args.points, seed=i, mode=args.mode, walkers=walkers)
    seconds = time.thread_time() - started
    passes = np.zeros(3)
    for i, (code, p) in enumerate(zip(codes, probabilities)):
        passes += _render_passes(renderer, code, p, args, walkers, i)
    return seconds, passes


def _same_bytes(renderers, codes, probabilities, args, walkers: int) -> bool:
    """Whether every renderer draws the first codes alike."""
    images = [[r.render(code, p, size=args.size, points=args.points, seed=i, mode=args.mode, walkers=walkers).tobytes() for r in renderers]
              for i, (code, p) in enumerate(zip(codes[:5], probabilities[:5]))]  # fmt: skip
    return all(len(set(drawn)) == 1 for drawn in images)


def fractal_speed(args) -> dict:
    """FineFractalDB: images/s and ns per point for each walker count, in CPU time of this thread,
    the counts (and, with ``--compare``, the two renderers) interleaved over ``--rounds`` rounds
    (this machine's speed swings within a minute); the share and ns per point of each pass; the
    bare chaos game, the floor one serial chain pays."""
    rng = np.random.default_rng(args.seed)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(args.images)]
    probabilities = [determinant_probabilities(code) for code in codes]
    thresholds = [(np.cumsum(p) * 2.0**32).astype(np.uint64) for p in probabilities]
    walker_counts = [int(w) for w in args.walkers.split(",")]
    renderers = {"this": _renderer(None)}
    if args.compare:
        renderers["compared"] = _renderer(args.compare)
    for renderer in renderers.values():
        for walkers in walker_counts:  # compile: the lanes once per count of maps
            for code, p in {code.shape[0]: (code, p) for code, p in zip(codes, probabilities)}.values():
                renderer.render(code, p, size=args.size, points=1000, seed=0, mode=args.mode, walkers=walkers)
            _render_passes(renderer, codes[0], probabilities[0], args, walkers, 0)
    _bare_chaos_game(codes[0], thresholds[0], 10, 1)

    def floor(_) -> tuple[float, np.ndarray]:
        started = time.thread_time()
        for i, (code, t) in enumerate(zip(codes, thresholds)):
            _bare_chaos_game(code, t, args.points, i + 1)
        return time.thread_time() - started, np.zeros(3)

    calls = {(name, w): lambda _, r=renderer, w=w: _time_renderer(r, codes, probabilities, args, w)
             for w in walker_counts for name, renderer in renderers.items()}
    rounds = interleaved(calls | {"floor": floor}, args.rounds)
    seconds = {key: sum(spent for spent, _ in measured) for key, measured in rounds.items()}
    passes = {key: sum(split for _, split in measured) for key, measured in rounds.items()}
    floor_seconds = seconds.pop("floor")
    passes.pop("floor")

    images = args.images * args.rounds
    total_points = images * args.points
    rows = {name: [] for name in renderers}
    for (name, walkers), spent in seconds.items():
        split = passes[name, walkers]
        share = split / split.sum()
        row = {"walkers": walkers, "images_per_s": round(images / spent, 1), "ns_per_point": round(1e9 * spent / total_points, 3),
               "ratio_to_one_walker": round(seconds[name, walker_counts[0]] / spent, 2),
               **{f"share_{part}": round(float(share[k]), 3) for k, part in enumerate(PASSES)},
               **{f"{part}_ns_per_point": round(1e9 * split[k] / total_points, 3) for k, part in enumerate(PASSES)}}  # fmt: skip
        if name == "this" and args.compare:
            row["speedup_over_compared"] = round(seconds["compared", walkers] / spent, 3)
            row["same_bytes_as_compared"] = _same_bytes(list(renderers.values()), codes, probabilities, args, walkers)
        rows[name].append(row)
    result = {"family": "finefractaldb", "mode": args.mode, "size": args.size, "points": args.points, "images": args.images,
              "rounds": args.rounds, "clock": "CPU time of the rendering thread",
              "floor_ns_per_point": round(1e9 * floor_seconds / total_points, 3), "walkers": rows["this"]}  # fmt: skip
    if args.compare:
        result["compared"] = {"file": args.compare, "walkers": rows["compared"]}
    return result


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
    result = {"family": args.family, "size": size, "images": args.images, "images_per_s": round(ours, 1),
              f"images_per_s_at_{SMALL_SIZE}": round(small, 1),
              "mean_vertices_x_orbits": round(float(np.mean([i.vertices * i.orbits for i in instances])), 1),
              "reference_images": len(reference), "images_per_s_on_reference_images": round(ours_on_reference, 1)}  # fmt: skip
    for name, renderer in (("pil_per_segment", pil_per_segment), ("pil_per_orbit", pil_per_orbit)):
        theirs = _images_per_second(lambda instance, seed: renderer(instance, family.style, settings.noise_cells, size, seed), reference)
        result[f"{name}_images_per_s"] = round(theirs, 2)
        result[f"ratio_to_{name}"] = round(ours_on_reference / theirs, 1)
    return result


def generation_speed(args) -> dict:
    """FineFractalDB's generation: seconds, instances/s and the minutes extrapolated to ``--full-classes``."""
    config = FineFractalDBConfig(n_classes=args.classes, instances_per_class=args.instances,
                                 render=RenderSettings(size=args.size or 256, points=args.points), workers=args.workers)  # fmt: skip
    _, summary = generate_finefractaldb(config)
    seconds = summary["seconds"]
    return {"classes": args.classes, "instances_per_class": args.instances, "workers": args.workers, "seconds": seconds,
            "instances_per_s": round(summary["n_instances"] / seconds, 1),
            "extrapolated_full_minutes": round(seconds * args.full_classes / args.classes / 60, 1),
            "class_acceptance_rate": round(summary["class_acceptance_rate"], 3),
            "instance_acceptance_rate": round(summary["instance_acceptance_rate"], 3)}  # fmt: skip


def main() -> None:
    command = parser(__doc__, "--json")
    command.add_argument("--generate", action="store_true", help="FineFractalDB's generation of a table instead")
    command.add_argument("--classes", type=int, default=100, help="--generate: classes generated")
    command.add_argument("--instances", type=int, default=1000, help="--generate: instances per class")
    command.add_argument("--workers", type=int, default=2, help="--generate: generator processes")
    command.add_argument("--full-classes", type=int, default=1000, help="--generate: classes extrapolated to")
    command.add_argument("--family", choices=("finefractaldb", "visual_atom", "rcdb"), default="finefractaldb")
    command.add_argument("--size", type=int, default=None, help="image side (default: 256 for fractals, 512 otherwise)")
    command.add_argument("--points", type=int, default=100_000)
    command.add_argument("--images", type=int, default=200)
    command.add_argument("--reference-images", type=int, default=10, help="instances the PIL references render")
    command.add_argument("--mode", choices=("point", "patch"), default="patch")
    command.add_argument("--seed", type=int, default=0)
    command.add_argument("--walkers", default="1,2,4,8,16", help="FineFractalDB: walker counts, the first the baseline of the ratios")
    command.add_argument("--rounds", type=int, default=3, help="FineFractalDB: interleaved rounds over the walker counts")
    command.add_argument("--compare", default=None, help="FineFractalDB: another version of fdsml/ifs/render.py, timed in the same rounds")
    args = command.parse_args()
    if args.generate:
        result = generation_speed(args)
    elif args.family == "finefractaldb":
        args.size = args.size or 256
        result = fractal_speed(args)
    else:
        result = orbit_speed(args)
    print_result(result, args.json)


if __name__ == "__main__":
    main()
