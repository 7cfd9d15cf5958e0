"""Table generation and instance drawing for any formula family (docs/method.md §2.2).

Every class is generated independently from ``SeedSequence(seed, spawn_key=(class_id,))`` and
every instance from ``SeedSequence(seed, spawn_key=(class_id, replacement, instance_id))``, so
the table does not depend on how classes are spread over worker processes, and any class can be
rebuilt alone. :func:`draw_instance` is the one rejection loop of an instance: the table uses it,
and so do fresh instances drawn in the loader (:mod:`fdsml.data.fractal_dataset`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from fdsml import fingerprints
from fdsml.errors import GenerationError
from fdsml.families.base import FamilySpec
from fdsml.seeds import SEED_LIMIT

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DrawnInstance:
    """An accepted instance: its parameters, rendering seed, rendering and occupancy."""

    instance: Any
    seed: int
    image: np.ndarray
    occupancy: float


def draw_instance(spec: FamilySpec, class_code: Any, rng: np.random.Generator, counts: Counter) -> DrawnInstance | None:
    """Perturb ``class_code`` until an instance passes the validity rules and the occupancy check.

    Each draw takes the perturbation, then a rendering seed, from ``rng``. Returns None after
    ``max_instance_attempts`` rejected draws; ``counts`` tallies draws and rejections.
    """
    family, settings = spec.family, spec.settings
    for _ in range(family.max_instance_attempts(settings)):
        counts["instance_draws"] += 1
        instance = family.perturb(class_code, rng, settings)
        if instance is None:
            counts["invalid_rejections"] += 1
            continue
        seed = int(rng.integers(SEED_LIMIT))
        image = family.render(instance, settings, seed)
        filled = family.occupancy(image, settings)
        if filled < settings.min_occupancy:
            counts["occupancy_rejections"] += 1
            continue
        return DrawnInstance(instance, seed, image, filled)
    return None


def generate_class(spec: FamilySpec, class_id: int) -> tuple[list[dict], Counter]:
    """All instances of one class; the class code is replaced when an instance keeps failing."""
    family, settings = spec.family, spec.settings
    counts = Counter()
    class_rng = np.random.default_rng(np.random.SeedSequence(settings.seed, spawn_key=(class_id,)))
    for replacement in range(settings.max_class_replacements + 1):
        counts["replacements"] = replacement
        code = family.sample_class(class_rng, settings, counts)
        rows = []
        for instance_id in range(settings.instances_per_class):
            sequence = np.random.SeedSequence(settings.seed, spawn_key=(class_id, replacement, instance_id))
            drawn = draw_instance(spec, code, np.random.default_rng(sequence), counts)
            if drawn is None:
                break
            rows.append(
                {
                    "class_id": class_id,
                    "instance_id": instance_id,
                    **family.instance_row(drawn.instance, settings),
                    "psi": family.descriptor(drawn.instance, settings).tolist(),
                    "seed": drawn.seed,
                    "occupancy": drawn.occupancy,
                }
            )
        else:
            return rows, counts
        logger.debug("class %d: an instance failed %d times, replacing the class code", class_id, family.max_instance_attempts(settings))
    raise GenerationError(
        f"class {class_id}: an instance failed {family.max_instance_attempts(settings)} draws in each of "
        f"{settings.max_class_replacements + 1} class codes of family {family.name!r}; raise "
        "fractals.max_class_replacements or the family's attempts, or lower fractals.min_occupancy"
    )


def _generate_class_job(args):
    return generate_class(*args)


def generate_table(spec: FamilySpec) -> tuple[pd.DataFrame, dict]:
    """The family's table (one row per instance, ``table_columns``) and its generation summary,
    rendered with the family's reference renderer (:meth:`FamilySpec.reference`)."""
    spec = spec.reference()
    settings = spec.settings
    started = time.perf_counter()
    jobs = [(spec, class_id) for class_id in range(settings.n_classes)]
    progress = dict(total=settings.n_classes, desc=f"{spec.name} classes", unit="class")
    if settings.workers == 1:
        results = [generate_class(*job) for job in tqdm(jobs, **progress)]
    else:
        with ProcessPoolExecutor(settings.workers, mp_context=get_context("spawn")) as pool:
            chunk = max(1, settings.n_classes // (8 * settings.workers))
            results = list(tqdm(pool.map(_generate_class_job, jobs, chunksize=chunk), **progress))
    rows = [row for class_rows, _ in results for row in class_rows]
    table = pd.DataFrame(rows, columns=list(spec.family.table_columns(settings)))
    totals = Counter()
    for _, counts in results:
        totals.update(counts)
    summary = summarize(spec, table, totals, time.perf_counter() - started)
    logger.info("%s: %d classes x %d instances in %.1f s", spec.name, settings.n_classes, settings.instances_per_class, summary["seconds"])
    return table, summary


def summarize(spec: FamilySpec, table: pd.DataFrame, totals: Counter, seconds: float) -> dict:
    """Counts, acceptance and rejection rates, occupancy statistics, the family's own entries and the time taken."""
    settings = spec.settings
    occupancies = table["occupancy"].to_numpy()
    return {
        "family": spec.name,
        "title": spec.family.title,
        "definition": spec.family.describe(settings),
        "n_classes": settings.n_classes,
        "instances_per_class": settings.instances_per_class,
        "n_instances": int(len(table)),
        "class_replacements": totals["replacements"],
        "instance_draws": totals["instance_draws"],
        "instance_invalid_rejections": totals["invalid_rejections"],
        "instance_occupancy_rejections": totals["occupancy_rejections"],
        "instance_acceptance_rate": len(table) / totals["instance_draws"],
        "occupancy": {
            "min": float(occupancies.min()),
            "mean": float(occupancies.mean()),
            "median": float(np.median(occupancies)),
            "max": float(occupancies.max()),
        },
        **spec.family.summary(table, totals, settings),
        "fingerprint": spec.family.fingerprint(settings),
        "table_digest": fingerprints.content_digest(table),
        "seconds": round(seconds, 3),
    }


def is_up_to_date(stored_codes: pd.DataFrame | None, stored_summary: dict | None, spec: FamilySpec) -> bool:
    """True when a stored table exists, was generated from this very family, configuration and code, and is unedited."""
    return (
        stored_codes is not None
        and stored_summary is not None
        and stored_summary.get("fingerprint") == spec.family.fingerprint(spec.settings)
        and stored_summary.get("table_digest") == fingerprints.content_digest(stored_codes)
    )


def sample_grid(table: pd.DataFrame, spec: FamilySpec, n_classes: int, n_instances: int, border: int = 2) -> np.ndarray:
    """A picture of the dataset: rows = the first classes, columns = their first instances."""
    classes = sorted(table["class_id"].unique())[:n_classes]
    chosen = table[table["class_id"].isin(classes) & (table["instance_id"] < n_instances)]
    columns = int(chosen["instance_id"].max()) + 1
    size = spec.size
    tile = size + border
    grid = np.full((len(classes) * tile + border, columns * tile + border), 255, dtype=np.uint8)
    for image, (_, row) in zip(spec.render_rows(chosen), chosen.iterrows()):
        top = classes.index(row["class_id"]) * tile + border
        left = int(row["instance_id"]) * tile + border
        grid[top : top + size, left : left + size] = image
    return grid


def _render_rows_job(args):
    table, spec = args
    return spec.render_rows(table)


def render_shards(table: pd.DataFrame, spec: FamilySpec, shard_size: int, workers: int = 1):
    """Yield the renderings of the table in row order, ``shard_size`` rows at a time."""
    jobs = [(table.iloc[start : start + shard_size], spec) for start in range(0, len(table), shard_size)]
    progress = dict(total=len(jobs), desc="Rendering shards", unit="shard")
    if workers == 1:
        yield from tqdm(map(_render_rows_job, jobs), **progress)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        yield from tqdm(pool.map(_render_rows_job, jobs), **progress)


def shards_fingerprint(table_digest: str, spec: FamilySpec) -> str:
    """The reuse fingerprint of :func:`render_shards`' output: the table's content digest, the family and settings, the code."""
    return fingerprints.fingerprint(spec.defining(), code=type(spec.family).__module__, inputs={"codes": table_digest})


