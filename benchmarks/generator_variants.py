"""FineFractalDB generator variants, measured side by side with the descriptor validation (the generator's choices the method leaves open).

    python benchmarks/generator_variants.py --jobs 2      # the whole table (see docs/studies.md for its time)
    python benchmarks/generator_variants.py --quick       # every variant at a smaller scale, minutes
    python benchmarks/generator_variants.py --tiny        # two variants in seconds (the test's mode)
    python benchmarks/generator_variants.py --print-dvc   # the same variants as `dvc exp run` commands
    python benchmarks/generator_variants.py --queue       # the variants queued as DVC experiments (--grid, --quick, --tiny, --only too)
    python benchmarks/generator_variants.py --grid --jobs 2      # the choices in combination (GRID, 64), full scale

Each variant is ``conf/base`` with a few dotted keys overridden (today's default, then each open
choice changed alone). ``--grid`` measures the choices in combination instead: every combination
of ``GRID``'s axes (sampler and its map counts x class filter threshold or off x positions per
class x perturbation scope), at the same scale, in the same table with the same figures
(``generator_grid.{json,md}``). For each, the ``fractals`` and ``validate_descriptor`` pipelines'
own nodes generate the table and validate the descriptor; the sweeps run over two factor ranges.
Writes ``generator_variants.json`` (one entry per variant: overrides, figures, wall and CPU
seconds per stage; the run's wall and CPU seconds) and ``.md``. ``--workers``/``--jobs N``
measures N variants at a time in processes of one Numba thread each.

Each variant is a trial of the Optuna study ``generator_variants_<scale>`` (``generator_grid_<scale>`` for
``--grid``; :mod:`fdsml.tuning.arms`, by default ``data/07_model_output/studies/<study>.db``, ``--storage``
for a database or journal file), keyed by the digest of its parameters and of the code that measures it:
a COMPLETE variant is reused while both are unchanged, a failed one runs again. A variant the generator
cannot complete is a result too (its error, in the table).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import math
import resource
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numba
import yaml

from fdsml import experiment_queue
from fdsml.config import with_overlay
from fdsml.errors import GenerationError
from fdsml.pipelines.fractals.nodes import generate_fractal_codes
from fdsml.pipelines.validate_descriptor.nodes import measure_sweeps, measure_triplet_agreement
from fdsml.tuning.arms import STUDIES_DIR, arm_results, open_arms_study, run_arms
from fdsml.validation.agreement import summarise_agreement
from fdsml.validation.report import variants_markdown
from fdsml.validation.sweeps import summarise_sweeps
from fdsml.validation.variants import variant_entry

logger = logging.getLogger("generator_variants")
LOG_FORMAT = "%(asctime)s %(name)s %(message)s"

ROOT = Path(__file__).resolve().parents[1]
PARAMETER_FILES = {
    "fractals": "conf/base/parameters_fractals.yml",
    "validate_descriptor": "conf/base/parameters_validate_descriptor.yml",
}

VARIANTS = {
    "default": {},
    "one map": {"fractals.perturbation.scope": "one_map"},
    "discrete factors": {"fractals.perturbation.factor": "discrete"},
    "factor range 0.2-1.8": {"fractals.perturbation.factor_range": [0.2, 1.8]},
    "one position per class": {"fractals.perturbation.positions_per_class": 1},
    "two positions per class": {"fractals.perturbation.positions_per_class": 2},
    "sigma factor, N 2..7": {"fractals.sigma_factor.n_maps": [2, 7]},
    "uniform sampler, N 2..7": {"fractals.sampler": "uniform"},
    "uniform sampler, N 2..4": {"fractals.sampler": "uniform", "fractals.uniform.n_maps": [2, 4]},
    "fill >= 0.1": {"fractals.class_filter.min_fill": 0.1},
    "fill >= 0.25": {"fractals.class_filter.min_fill": 0.25},
    "no class filter": {"fractals.class_filter.enabled": False},
}
"""Today's default and each open choice of the generator changed alone."""

GRID = {
    "sampler": {
        "sigma factor N 2..4": {},
        "sigma factor N 2..7": {"fractals.sigma_factor.n_maps": [2, 7]},
        "uniform N 2..7": {"fractals.sampler": "uniform"},
        "uniform N 2..4": {"fractals.sampler": "uniform", "fractals.uniform.n_maps": [2, 4]},
    },
    "class filter": {
        "fill >= 0.2": {},
        "fill >= 0.1": {"fractals.class_filter.min_fill": 0.1},
        "fill >= 0.25": {"fractals.class_filter.min_fill": 0.25},
        "no class filter": {"fractals.class_filter.enabled": False},
    },
    "positions": {
        "6 positions": {},
        "1 position per class": {"fractals.perturbation.positions_per_class": 1},
    },
    "scope": {
        "every map": {},
        "one map": {"fractals.perturbation.scope": "one_map"},
    },
}
"""The open choices in combination: each axis lists its settings, today's default first (no overrides)."""


def grid_variants() -> dict[str, dict]:
    """Every combination of ``GRID``'s axes, named by its settings; the first is today's default."""
    return {
        ", ".join(name for name, _ in combination): {key: value for _, overrides in combination for key, value in overrides.items()}
        for combination in itertools.product(*(axis.items() for axis in GRID.values()))
    }


SWEEP_RANGES = ([0.6, 1.4], [0.2, 1.8])
"""The sweeps run over the method's factor range and a wider one; the first is ``sweeps`` of the
validation summary."""

SCALES = {
    "full": {
        "fractals.n_classes": 50,
        "fractals.instances_per_class": 100,
        "validate_descriptor.n_triplets": 3000,
        "validate_descriptor.chunk_size": 12000,
        "validate_descriptor.n_base_codes": 50,
        "validate_descriptor.sweep.n_factors": 33,
        "validate_descriptor.sweep.compare_fresh_seeds": False,
    },
    "quick": {
        "fractals.n_classes": 20,
        "fractals.instances_per_class": 20,
        "validate_descriptor.n_triplets": 300,
        "validate_descriptor.n_base_codes": 5,
        "validate_descriptor.sweep.n_factors": 17,
        "validate_descriptor.sweep.compare_fresh_seeds": False,
    },
    "tiny": {
        "fractals.n_classes": 4,
        "fractals.instances_per_class": 5,
        "fractals.render.size": 32,
        "fractals.render.points": 600,
        "fractals.class_filter.size": 96,
        "fractals.class_filter.points": 4000,
        "validate_descriptor.n_triplets": 20,
        "validate_descriptor.n_base_codes": 2,
        "validate_descriptor.sweep.n_factors": 5,
        "validate_descriptor.sweep.n_noise_seeds": 2,
        "validate_descriptor.sweep.compare_fresh_seeds": False,
        "validate_descriptor.grid_triplets_per_filter": 1,
    },
}
"""The full table's scale (50 classes x 100 instances, 3,000 triplets per filter, 300 sweeps: the
published statistics' 50 base codes x 6 coefficients at 33 factors; every triplet of the four
filters in one chunk, so each of the 5,000 rows renders once) and two smaller ones for a check."""


def base_parameters() -> dict:
    """``conf/base``'s ``fractals`` and ``validate_descriptor`` parameters."""
    return {key: yaml.safe_load((ROOT / path).read_text())[key] for key, path in PARAMETER_FILES.items()}


@contextmanager
def _cpu_time(seconds: dict[str, float], stage: str):
    """Add the CPU seconds this process spends in the block to ``seconds[stage]``."""
    started = time.process_time()
    try:
        yield
    finally:
        seconds[stage] = round(seconds.get(stage, 0.0) + time.process_time() - started, 3)


CODE_MODULES = ("fdsml.pipelines.fractals.nodes", "fdsml.pipelines.validate_descriptor.nodes", "fdsml.validation.variants")


def variant_fingerprints(jobs: dict[str, tuple[dict, dict]]) -> dict[str, str]:
    """Each variant's name and the digest of its parameters, the sweep ranges and the code that measures it."""
    from fdsml import reuse

    code = reuse.code_digest(*CODE_MODULES)
    return {
        name: hashlib.sha256(json.dumps([overrides, params, SWEEP_RANGES, code], sort_keys=True).encode()).hexdigest()[:16]
        for name, (overrides, params) in jobs.items()
    }


def run_variant(jobs: dict[str, tuple[dict, dict]], name: str) -> tuple[float, dict]:
    """Generate one variant's table with the fractals node, validate it with the validate_descriptor nodes; its
    ``same`` agreement (-inf when the generator cannot complete it) and its entry.

    The entry records the CPU seconds of each stage (``cpu_seconds``: generation, triplets,
    sweeps, statistics) beside the wall ``seconds``. Its process logs as the main one does and its
    Numba kernels run on one thread (parallel variants share the cores).
    """
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    numba.set_num_threads(1)
    overrides, params = jobs[name]
    started = time.perf_counter()
    fractals = params["fractals"]
    cpu: dict[str, float] = {}
    try:
        with _cpu_time(cpu, "generation"):
            table, fractal_summary = generate_fractal_codes(fractals, None, None)
    except GenerationError as error:  # a variant the generator cannot complete is a result too
        logger.warning("variant %r: %s", name, error)
        return -math.inf, {"name": name, "overrides": overrides, "error": str(error), "cpu_seconds": cpu}
    with _cpu_time(cpu, "triplets"):
        triplets = measure_triplet_agreement(table, fractals, params["validate_descriptor"])
    ranged = [with_overlay(params, {"validate_descriptor.sweep.factor_range": list(r)}, only_existing=True)["validate_descriptor"] for r in SWEEP_RANGES]
    with _cpu_time(cpu, "sweeps"):
        points = [measure_sweeps(table, fractals, sweep_params) for sweep_params in ranged]
    with _cpu_time(cpu, "statistics"):
        agreement = summarise_agreement(triplets)
        sweeps = {f"[{low}, {high}]": summarise_sweeps(p) for (low, high), p in zip(SWEEP_RANGES, points)}
    entry = variant_entry(name, overrides, agreement, sweeps, fractal_summary)
    entry["seconds"] = round(time.perf_counter() - started, 1)
    entry["cpu_seconds"] = cpu
    logger.info("variant %r done in %.0f s (%.0f CPU s)", name, entry["seconds"], sum(cpu.values()))
    return entry["agreement"]["same"], entry


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the worker processes)."""
    return sum(
        usage.ru_utime + usage.ru_stime for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


def experiments(scale: dict, variants: dict[str, dict]) -> list[experiment_queue.Experiment]:
    """One DVC experiment per variant on the validate_descriptor stage, at ``scale``."""
    return [
        experiment_queue.Experiment(
            experiment_queue.experiment_name(name),
            experiment_queue.settings(PARAMETER_FILES, {**scale, **overrides}.items()),
            stage="validate_descriptor",
        )
        for name, overrides in variants.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="every variant at a smaller scale")
    size.add_argument("--tiny", action="store_true", help="two variants in seconds")
    parser.add_argument("--workers", "--jobs", type=int, default=1, help="variants measured in parallel processes")
    parser.add_argument("--grid", action="store_true", help="the choices in combination (GRID), at the same scale")
    parser.add_argument("--only", nargs="+", help="measure these variants (or grid combinations) only")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "data/08_reporting")
    parser.add_argument("--storage", help=f"the variants' Optuna storage: a database URL or journal file (default: {STUDIES_DIR}/<study>.db)")
    parser.add_argument("--print-dvc", action="store_true", help="print the grid as dvc exp run commands and stop")
    parser.add_argument("--queue", action="store_true", help="queue the grid as DVC experiments (dvc queue start runs them)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)

    catalogue = grid_variants() if args.grid else VARIANTS
    unknown = sorted(set(args.only or ()) - set(catalogue))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {list(catalogue)}")
    scale_name = "tiny" if args.tiny else "quick" if args.quick else "full"
    names = args.only or (list(catalogue)[:2] if args.tiny else list(catalogue))
    variants = {name: catalogue[name] for name in names}
    if args.print_dvc or args.queue:
        grid = experiments(SCALES[scale_name], variants)
        if args.queue:
            experiment_queue.queue(grid, ROOT)
            print("\n".join(experiment_queue.next_steps(args.workers)))
        else:
            print("\n".join(experiment_queue.printed(grid)))
        return
    base = with_overlay(base_parameters(), SCALES[scale_name], only_existing=True)
    jobs = {name: (overrides, with_overlay(base, overrides, only_existing=True)) for name, overrides in variants.items()}
    stem = "generator_grid" if args.grid else "generator_variants"
    study, fingerprints = f"{stem}_{scale_name}", variant_fingerprints(jobs)
    started, cpu_started = time.perf_counter(), cpu_seconds()
    failed = run_arms(study, fingerprints, partial(run_variant, jobs), args.workers, args.storage, str(ROOT / STUDIES_DIR))
    entries = arm_results(open_arms_study(study, args.storage, str(ROOT / STUDIES_DIR)), fingerprints)["result"].tolist()
    result = {
        "mode": "grid" if args.grid else "variants",
        "scale": scale_name,
        "scale_overrides": SCALES[scale_name],
        "sweep_factor_ranges": [list(r) for r in SWEEP_RANGES],
        "seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds": round(cpu_seconds() - cpu_started, 3),
        "workers": args.workers,
        "variants": entries,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.output_dir / f"{stem}.md").write_text(variants_markdown(entries))
    logger.info(
        "%d variants (%s scale, %d processes) in %.0f s wall, %.0f CPU s (%.1f core-minutes) -> %s",
        len(entries), scale_name, args.workers, result["seconds"], result["cpu_seconds"], result["cpu_seconds"] / 60, args.output_dir,
    )
    if failed:
        raise SystemExit(f"variant(s) {', '.join(failed)} failed (logged above); run the command again to rerun them")


if __name__ == "__main__":
    main()
