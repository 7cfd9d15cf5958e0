"""Perturbation sweeps: does D grow with the size of a one-parameter perturbation? (docs/method.md §6.3)

From a class's base code, one of the family's sweep parameters (``position``; FineFractalDB: a
coefficient, rescaled in every map, probabilities recomputed from |det|) is multiplied by each
factor s of an even grid on [0.6, 1.4] (s = 1 included), the result is rendered, and D to the
base rendering is measured together with d_Psi to the base.

Seeding: with common random numbers (the default) every code of a sweep is rendered with the
base's seed, so D measures structure rather than sampling noise; otherwise every point gets a
fresh seed. Either way the noise floor of a base code is the median D between its rendering
with the base seed and re-renderings with other seeds.

Per sweep the two directions (s <= 1 and s >= 1, both starting at s = 1) are read outward:
D is *monotone* when it never decreases, and *monotone within noise* when it never falls more
than the noise floor below its running maximum. A sweep is ``contractive`` when every point in it
passes the family's validity rules (FineFractalDB: strict contraction); one that renders empty anywhere counts in ``n_empty`` (D to an empty image is the frame's L1
diagonal, see ``fdsml.ifs.chamfer``).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from typing import Any

from fdsml.families import FamilySpec
from fdsml.ifs.chamfer import chamfer_distances
from fdsml.ifs.descriptor import descriptor_distance
from fdsml.seeds import SEED_LIMIT

logger = logging.getLogger(__name__)

def sweep_factors(factor_range: tuple[float, float], n_factors: int) -> np.ndarray:
    """``n_factors`` evenly spaced factors on ``factor_range``; 1.0 must be one of them and is set exactly."""
    factors = np.linspace(factor_range[0], factor_range[1], n_factors)
    centre = int(np.argmin(np.abs(factors - 1.0)))
    if not np.isclose(factors[centre], 1.0, rtol=0.0, atol=1e-9):
        raise ValueError(f"{n_factors} evenly spaced factors on {list(factor_range)} do not include 1.0")
    factors[centre] = 1.0
    return factors


def base_codes(table: pd.DataFrame, spec: FamilySpec, n_base_codes: int, rng: np.random.Generator) -> tuple[list[Any], np.ndarray]:
    """The class codes of ``n_base_codes`` distinct classes drawn at random, with their class ids."""
    classes = np.unique(table["class_id"].to_numpy())
    if n_base_codes > classes.shape[0]:
        raise ValueError(f"{n_base_codes} base codes need as many classes; the table has {classes.shape[0]}")
    chosen = np.sort(rng.choice(classes, size=n_base_codes, replace=False))
    rows = table.groupby("class_id")
    return [spec.family.class_code(rows.get_group(class_id), spec.settings) for class_id in chosen], chosen


def _base(spec: FamilySpec, base: Any):
    """The base code as an instance (every parameter at factor 1)."""
    return spec.family.rescaled(base, 0, 1.0, spec.settings)[0]


def noise_floor(base: Any, spec: FamilySpec, seed: int, other_seeds: np.ndarray) -> float:
    """Median D between the base rendered with ``seed`` and re-rendered with each of ``other_seeds``."""
    instance = _base(spec, base)
    reference = spec.foreground(spec.render(instance, seed))
    others = spec.foreground(np.stack([spec.render(instance, int(s)) for s in other_seeds]))
    return float(np.median(chamfer_distances(reference, others)))


def sweep(
    base: Any,
    position: int,
    factors: np.ndarray,
    spec: FamilySpec,
    seed: int,
    point_seeds: np.ndarray | None = None,
) -> pd.DataFrame:
    """One sweep: per factor, d_Psi and D to the base, whether the point is valid (``contractive``) and renders empty.

    Every point renders with ``seed`` (common random numbers) unless ``point_seeds`` gives one
    seed per factor. A point that cannot be rendered at all is an empty image without d_Psi.
    """
    base_instance = _base(spec, base)
    reference = spec.foreground(spec.render(base_instance, seed))
    base_psi = spec.descriptor(base_instance)
    images = np.zeros((factors.shape[0], spec.size, spec.size), dtype=bool)
    distances = np.full(factors.shape[0], np.nan)
    contractive = np.empty(factors.shape[0], dtype=bool)
    for k, factor in enumerate(factors):
        instance, contractive[k] = spec.family.rescaled(base, position, float(factor), spec.settings)
        if instance is not None:
            images[k] = spec.foreground(spec.render(instance, seed if point_seeds is None else int(point_seeds[k])))
            distances[k] = descriptor_distance(spec.descriptor(instance), base_psi)
    return pd.DataFrame(
        {
            "position": position,
            "factor": factors.astype(np.float64),
            "psi_distance": distances,
            "chamfer": chamfer_distances(reference, images),
            "contractive": contractive,
            "empty": ~images.reshape(factors.shape[0], -1).any(axis=1),
        }
    )


def run_sweeps(
    bases: list[Any],
    class_ids: np.ndarray,
    factors: np.ndarray,
    spec: FamilySpec,
    rng: np.random.Generator,
    n_noise_seeds: int = 4,
    common_random_numbers: bool = True,
) -> pd.DataFrame:
    """Sweeps of every sweep parameter of every base code, stacked with ``base``, ``class_id``,
    ``noise_floor`` and ``seeding`` ("common" or "fresh") columns."""
    frames = []
    n_parameters = len(spec.family.sweep_parameters(spec.settings))
    for index, (base, class_id) in enumerate(zip(bases, class_ids)):
        seeds = rng.integers(SEED_LIMIT, size=1 + n_noise_seeds + n_parameters * factors.shape[0])
        seed, other_seeds = int(seeds[0]), seeds[1 : 1 + n_noise_seeds]
        point_seeds = seeds[1 + n_noise_seeds :].reshape(n_parameters, -1)
        floor = noise_floor(base, spec, seed, other_seeds)
        for position in range(n_parameters):
            frame = sweep(base, position, factors, spec, seed, None if common_random_numbers else point_seeds[position])
            frames.append(frame.assign(base=index, class_id=class_id, noise_floor=floor))
        logger.debug("sweeps of base code %d (class %s) done, noise floor %.3f px", index, class_id, floor)
    seeding = "common" if common_random_numbers else "fresh"
    return pd.concat(frames, ignore_index=True).assign(seeding=seeding)


def is_monotone(values: np.ndarray, tolerance: float = 0.0) -> bool:
    """True when no value falls more than ``tolerance`` below the running maximum of those before it."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape[0] < 2:
        return True
    running = np.maximum.accumulate(values)[:-1]
    return bool(np.all(values[1:] >= running - tolerance))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation; NaN when either side is constant or has fewer than 3 finite pairs."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.shape[0] < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def sweep_statistics(points: pd.DataFrame) -> pd.DataFrame:
    """One row per sweep (base, position): contractive, empty, noise floor, monotonicity and
    Spearman per direction, read outward from s = 1."""
    rows = []
    for (base, position), sweep_points in points.groupby(["base", "position"], sort=True):
        ordered = sweep_points.sort_values("factor")
        factors = ordered["factor"].to_numpy()
        centre = int(np.argmin(np.abs(factors - 1.0)))
        chamfer = ordered["chamfer"].to_numpy()
        distance = ordered["psi_distance"].to_numpy()
        floor = float(ordered["noise_floor"].iloc[0])
        sides = {"lower": slice(centre, None, -1), "upper": slice(centre, None)}
        row = {
            "base": base,
            "class_id": ordered["class_id"].iloc[0],
            "position": position,
            "contractive": bool(ordered["contractive"].all()),
            "empty": bool(ordered["empty"].any()),
            "noise_floor": floor,
        }
        for side, order in sides.items():
            row[f"monotone_{side}"] = is_monotone(chamfer[order])
            row[f"monotone_within_noise_{side}"] = is_monotone(chamfer[order], floor)
            row[f"spearman_{side}"] = spearman(distance[order], chamfer[order])
        row["monotone"] = row["monotone_lower"] and row["monotone_upper"]
        row["monotone_within_noise"] = row["monotone_within_noise_lower"] and row["monotone_within_noise_upper"]
        rows.append(row)
    return pd.DataFrame(rows)


def pooled_spearman(points: pd.DataFrame) -> pd.Series:
    """Per base code: Spearman between d_Psi and D over all points of its sweeps."""
    return pd.Series({base: spearman(p["psi_distance"], p["chamfer"]) for base, p in points.groupby("base")}, dtype=np.float64)


def _fraction(flags: pd.Series) -> float | None:
    return float(flags.mean()) if len(flags) else None


def _median(values: np.ndarray) -> float | None:
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.shape[0] else None


def summarise_sweeps(points: pd.DataFrame) -> dict:
    """Counts, monotone fractions and median Spearman, split into contractive and non-contractive sweeps.

    Fractions and medians over an empty group are None. Spearman medians pool both directions of
    every sweep of the group, leaving out undefined (constant) ones.
    """
    per_sweep = sweep_statistics(points)
    contractive = per_sweep[per_sweep["contractive"]]
    noncontractive = per_sweep[~per_sweep["contractive"]]

    def spearmans(group: pd.DataFrame) -> np.ndarray:
        return np.concatenate([group["spearman_lower"].to_numpy(), group["spearman_upper"].to_numpy()])

    return {
        "seeding": str(points["seeding"].iloc[0]),
        "n_base_codes": int(per_sweep["base"].nunique()),
        "n_factors": int(points.groupby(["base", "position"]).size().iloc[0]),
        "n_sweeps": int(len(per_sweep)),
        "n_contractive": int(len(contractive)),
        "contractive_fraction": _fraction(per_sweep["contractive"]),
        "monotone_fraction_contractive": _fraction(contractive["monotone"]),
        "monotone_within_noise_fraction_contractive": _fraction(contractive["monotone_within_noise"]),
        "median_spearman_contractive": _median(spearmans(contractive)),
        "n_noncontractive": int(len(noncontractive)),
        "monotone_fraction_noncontractive": _fraction(noncontractive["monotone"]),
        "monotone_within_noise_fraction_noncontractive": _fraction(noncontractive["monotone_within_noise"]),
        "median_spearman_noncontractive": _median(spearmans(noncontractive)),
        "median_spearman_pooled": _median(pooled_spearman(points).to_numpy()),
        "n_empty": int(per_sweep["empty"].sum()),
        "n_empty_renderings": int(points["empty"].sum()),
        "noise_floor_px_median": _median(per_sweep.groupby("base")["noise_floor"].first().to_numpy()),
    }
