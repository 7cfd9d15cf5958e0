"""Rendering speed of ``fdsml.ifs.render`` on one thread, in images/s and ns per point.

    python benchmarks/render_speed.py --size 256 --points 100000 --images 200 --mode patch --json

Also times a bare chaos-game loop (no framing, no rasterisation) on the same codes, the floor
any renderer pays, and prints the renderer's cost as a ratio to it measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numba as nb  # noqa: E402
import numpy as np  # noqa: E402

from fdsml.ifs import determinant_probabilities, render, sample_sigma_factor_code  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--mode", choices=("point", "patch"), default="patch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(args.images)]
    probabilities = [determinant_probabilities(code) for code in codes]
    thresholds = [(np.cumsum(p) * 2.0**32).astype(np.uint64) for p in probabilities]
    render(codes[0], probabilities[0], size=args.size, points=1000, seed=0, mode=args.mode)
    _bare_chaos_game(codes[0], thresholds[0], 10, 1)

    started = time.perf_counter()
    for i, (code, p) in enumerate(zip(codes, probabilities)):
        render(code, p, size=args.size, points=args.points, seed=i, mode=args.mode)
    render_seconds = time.perf_counter() - started

    started = time.perf_counter()
    for i, (code, t) in enumerate(zip(codes, thresholds)):
        _bare_chaos_game(code, t, args.points, i + 1)
    floor_seconds = time.perf_counter() - started

    total_points = args.images * args.points
    result = {
        "mode": args.mode,
        "size": args.size,
        "points": args.points,
        "images": args.images,
        "images_per_s": round(args.images / render_seconds, 1),
        "ns_per_point": round(1e9 * render_seconds / total_points, 3),
        "floor_ns_per_point": round(1e9 * floor_seconds / total_points, 3),
        "ratio_to_floor": round(render_seconds / floor_seconds, 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
