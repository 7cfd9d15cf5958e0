"""Whether interleaved walkers draw the same pictures as one orbit, measured.

    python benchmarks/walker_equivalence.py --codes 300 --size 64 --points 4000 --json
    python benchmarks/walker_equivalence.py --codes 100 --size 256 --points 100000 --json
    python benchmarks/walker_equivalence.py --validation --classes 40 --triplets 300 --walkers 128 --json

For each of ``--codes`` codes drawn as the codes table draws them (sigma-factor sampler, |det|
probabilities), three renderings: one walker with the image's seed (the reference), one walker
with another seed (the rendering noise floor), ``--walkers`` walkers with the image's seed. Prints
the Chamfer distance (pixels) of the reference to each, and the occupancy of each: mean and a 95 %
bootstrap interval of the mean, and of the paired difference (walkers minus noise floor).

``--validation`` instead runs the descriptor validation (``fdsml.validation``: triplet agreement
per candidate filter, the perturbation sweeps with common random numbers) on one codes table of
``--classes`` x ``--instances`` (class filter off), rendered once with one walker and once with
``--walkers``: the same triplets, base codes and seeds, only the renderer differs. Prints both
summaries side by side: agreement per filter with its 95 % Wilson interval, and the sweeps'
monotone fractions, median Spearman and noise floor.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from fdsml.families import family_spec
from fdsml.families.generation import generate_table
from fdsml.ifs import chamfer_distances, determinant_probabilities, occupancy, render, sample_sigma_factor_code
from fdsml.seeds import generator
from fdsml.validation.agreement import measure_all_filters, summarise_agreement
from fdsml.validation.sweeps import base_codes, run_sweeps, summarise_sweeps, sweep_factors

SWEEP_KEYS = (
    "n_sweeps",
    "n_contractive",
    "monotone_fraction_contractive",
    "monotone_within_noise_fraction_contractive",
    "median_spearman_contractive",
    "median_spearman_pooled",
    "noise_floor_px_median",
    "n_empty_renderings",
)


def interval(values: np.ndarray, rng: np.random.Generator, resamples: int = 2000) -> dict:
    """The mean and a 95 % percentile-bootstrap interval of it."""
    means = rng.choice(values, size=(resamples, values.size)).mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": round(float(values.mean()), 4), "ci95": [round(float(low), 4), round(float(high), 4)]}


def validation(args) -> dict:
    """The descriptor validation's agreement per filter and sweeps with one walker and with ``--walkers``."""
    params = {
        "seed": args.seed,
        "n_classes": args.classes,
        "instances_per_class": args.instances,
        "class_filter": {"enabled": False},
        "render": {"size": args.size, "points": args.points, "mode": args.mode},
    }
    table, _ = generate_table(family_spec(params))
    factors = sweep_factors((0.6, 1.4), args.factors)
    result = {"classes": args.classes, "instances": args.instances, "triplets_per_filter": args.triplets, "size": args.size, "points": args.points}
    for walkers in (1, args.walkers):
        spec = family_spec({**params, "render": {**params["render"], "walkers": walkers}})
        triplets = measure_all_filters(table, spec, args.triplets, generator(args.seed, "descriptor_validation", 0))
        agreement = summarise_agreement(triplets)
        bases, class_ids = base_codes(table, spec, args.base_codes, generator(args.seed, "descriptor_validation", 1))
        points = run_sweeps(bases, class_ids, factors, spec, generator(args.seed, "descriptor_validation", 2), 4, True)
        sweeps = summarise_sweeps(points)
        result[f"walkers_{walkers}"] = {
            "agreement": {name: [round(value, 3), [round(bound, 3) for bound in agreement["agreement_ci95"][name]]] for name, value in agreement["agreement"].items()},
            "sweeps": {key: sweeps[key] if not isinstance(sweeps[key], float) else round(sweeps[key], 3) for key in SWEEP_KEYS},
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", type=int, default=300)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--points", type=int, default=4000)
    parser.add_argument("--mode", choices=("point", "patch"), default="patch")
    parser.add_argument("--walkers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--validation", action="store_true", help="the descriptor validation instead of Chamfer and occupancy")
    parser.add_argument("--classes", type=int, default=40, help="--validation: classes of the codes table")
    parser.add_argument("--instances", type=int, default=10, help="--validation: instances per class")
    parser.add_argument("--triplets", type=int, default=300, help="--validation: triplets per candidate filter")
    parser.add_argument("--base-codes", type=int, default=5, help="--validation: codes swept")
    parser.add_argument("--factors", type=int, default=17, help="--validation: sweep factors on [0.6, 1.4]")
    args = parser.parse_args()
    if args.validation:
        result = validation(args)
        print(json.dumps(result) if args.json else json.dumps(result, indent=1))
        return

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
