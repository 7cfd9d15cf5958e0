"""Whether interleaved walkers draw the same pictures as one orbit (issue 27), measured.

    python benchmarks/walker_equivalence.py --codes 300 --size 64 --points 4000 --json
    python benchmarks/walker_equivalence.py --codes 100 --size 256 --points 100000 --json

For each of ``--codes`` codes drawn as the codes table draws them (sigma-factor sampler, |det|
probabilities), three renderings: one walker with the image's seed (the reference), one walker
with another seed (the rendering noise floor), ``--walkers`` walkers with the image's seed. Prints
the Chamfer distance (pixels) of the reference to each, and the occupancy of each: mean and a 95 %
bootstrap interval of the mean, and of the paired difference (walkers minus noise floor).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from fdsml.ifs import chamfer_distances, determinant_probabilities, occupancy, render, sample_sigma_factor_code


def interval(values: np.ndarray, rng: np.random.Generator, resamples: int = 2000) -> dict:
    """The mean and a 95 % percentile-bootstrap interval of it."""
    means = rng.choice(values, size=(resamples, values.size)).mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": round(float(values.mean()), 4), "ci95": [round(float(low), 4), round(float(high), 4)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", type=int, default=300)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--points", type=int, default=4000)
    parser.add_argument("--mode", choices=("point", "patch"), default="patch")
    parser.add_argument("--walkers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(args.codes)]
    settings = dict(size=args.size, points=args.points, mode=args.mode)
    renders = {"reference": [], "noise_floor": [], "walkers": []}
    for i, code in enumerate(codes):
        p = determinant_probabilities(code)
        renders["reference"].append(render(code, p, seed=2 * i, **settings))
        renders["noise_floor"].append(render(code, p, seed=2 * i + 1, **settings))
        renders["walkers"].append(render(code, p, seed=2 * i, walkers=args.walkers, **settings))
    images = {name: np.stack(stack) for name, stack in renders.items()}
    floor = chamfer_distances(images["reference"], images["noise_floor"])
    ours = chamfer_distances(images["reference"], images["walkers"])
    fill = {name: np.array([occupancy(image) for image in stack]) for name, stack in images.items()}
    result = {
        **settings,
        "codes": args.codes,
        "walkers": args.walkers,
        "chamfer_noise_floor": interval(floor, rng),
        "chamfer_walkers": interval(ours, rng),
        "chamfer_walkers_minus_floor": interval(ours - floor, rng),
        "occupancy": {name: interval(values, rng) for name, values in fill.items()},
        "occupancy_walkers_minus_reference": interval(fill["walkers"] - fill["reference"], rng),
        "occupancy_floor_minus_reference": interval(fill["noise_floor"] - fill["reference"], rng),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>36}: {value}")


if __name__ == "__main__":
    main()
