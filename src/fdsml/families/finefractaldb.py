"""FineFractalDB, the first formula family: IFS codes from :mod:`fdsml.ifs` behind the family interface.

A class code is an IFS code (sigma-factor or uniform sampler, class filter) with the coefficient
positions its instances may perturb; an instance rescales one position (docs/method.md §2.2) and
is valid when still strictly contractive. Its descriptor is Psi, the probability-weighted mean of
the maps' six coefficients, kept unscaled so the tables stay byte-identical: every entry already
lies on one scale (linear coefficients of a contractive map and translations in [-1, 1], times
the perturbation factor).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from fdsml.families import register_family
from fdsml.families.base import Family, FamilySpec
from fdsml.families.generation import generate_table
from fdsml.ifs.codes import (
    COEFFICIENT_NAMES,
    POSITIONS,
    class_positions,
    determinant_probabilities,
    interpolate_codes,
    is_contractive,
    rescale_coefficient,
)
from fdsml.ifs.descriptor import psi
from fdsml.ifs.finefractaldb import (
    MAP_COLUMN,
    FineFractalDBConfig,
    class_code,
    class_filter_acceptance,
    instance_code,
    row_perturbation,
    sample_class_code,
)
from fdsml.ifs.table_check import check_codes_table


@dataclass(frozen=True)
class FractalClass:
    """A class code and the coefficient positions its instances may rescale."""

    code: np.ndarray
    positions: tuple[int, ...]


@dataclass(frozen=True)
class FractalInstance:
    """One perturbed code: coefficients ``(N, 6)``, |det| probabilities, and the perturbation that made it."""

    coefficients: np.ndarray
    probabilities: np.ndarray
    position: int
    factor: float
    map_index: int | None = None


class FineFractalDB(Family):
    name = "finefractaldb"
    title = "FineFractalDB"
    settings_type = FineFractalDBConfig

    def image_size(self, settings: FineFractalDBConfig) -> int:
        return settings.render.size

    def max_instance_attempts(self, settings: FineFractalDBConfig) -> int:
        return settings.perturbation.max_attempts

    def sample_class(self, rng, settings: FineFractalDBConfig, counts: Counter) -> FractalClass:
        code = sample_class_code(settings, rng, counts)
        return FractalClass(code, class_positions(rng, settings.perturbation.positions_per_class))

    def perturb(self, class_code: FractalClass, rng, settings: FineFractalDBConfig) -> FractalInstance | None:
        coefficients, position, factor, map_index = settings.perturbation.draw(class_code.code, rng, class_code.positions)
        if not is_contractive(coefficients):
            return None
        return FractalInstance(coefficients, determinant_probabilities(coefficients), position, factor, map_index)

    def render(self, instance: FractalInstance, settings: FineFractalDBConfig, seed: int) -> np.ndarray:
        return settings.render.render(instance.coefficients, instance.probabilities, seed)

    def reference_settings(self, settings: FineFractalDBConfig) -> FineFractalDBConfig:
        """One walker: the table's renderer whatever ``fractals.render.walkers`` renders the training images with."""
        return replace(settings, render=replace(settings.render, walkers=1))

    def descriptor(self, instance: FractalInstance, settings: FineFractalDBConfig) -> np.ndarray:
        return psi(instance.coefficients, instance.probabilities)

    def descriptor_names(self, settings: FineFractalDBConfig) -> tuple[str, ...]:
        return tuple(f"psi_{name}" for name in COEFFICIENT_NAMES)

    def sweep_parameters(self, settings: FineFractalDBConfig) -> tuple[str, ...]:
        return COEFFICIENT_NAMES

    def rescaled(self, class_code: FractalClass, parameter: int, factor: float, settings: FineFractalDBConfig):
        """Coefficient ``parameter`` rescaled in every map; probabilities recomputed from |det| (None: all maps singular)."""
        code = rescale_coefficient(class_code.code, parameter, factor)
        try:
            probabilities = determinant_probabilities(code)
        except ValueError:
            return None, is_contractive(code)
        return FractalInstance(code, probabilities, parameter, factor), is_contractive(code)

    def perturbation_range(self, settings: FineFractalDBConfig) -> tuple[float, float]:
        return tuple(settings.perturbation.factor_range)

    def perturbed_parameter(self, instance: FractalInstance) -> int:
        return instance.position

    def interpolated(self, instance_0: FractalInstance, instance_1: FractalInstance, alpha: float, settings) -> FractalInstance:
        """Map k of one code with map k of the other; probabilities from |det| (a convex combination of
        contractions is a contraction, so every code on the line renders)."""
        code = interpolate_codes(instance_0.coefficients, instance_1.coefficients, [alpha])[0]
        return FractalInstance(code, determinant_probabilities(code), instance_0.position, instance_0.factor)

    def interpolation_groups(self, table: pd.DataFrame) -> pd.Series:
        """Codes interpolate map by map: rows with the same number of maps."""
        return table["n_maps"]

    def table_columns(self, settings: FineFractalDBConfig) -> tuple[str, ...]:
        return settings.table_columns

    def instance_row(self, instance: FractalInstance, settings: FineFractalDBConfig) -> dict:
        row = {
            "n_maps": instance.coefficients.shape[0],
            "coefficients": instance.coefficients.reshape(-1).tolist(),
            "probabilities": instance.probabilities.tolist(),
            "position": instance.position,
            "factor": instance.factor,
        }
        if instance.map_index is not None:
            row[MAP_COLUMN] = instance.map_index
        return row

    def instance(self, row) -> FractalInstance:
        coefficients, probabilities = instance_code(row)
        return FractalInstance(coefficients, probabilities.astype(np.float64), *row_perturbation(row))

    def class_code(self, rows: pd.DataFrame, settings: FineFractalDBConfig) -> FractalClass:
        """The first row's code with its perturbation undone; the positions are all six, or (with fewer
        per class, which the table does not store) those the class's rows perturbed."""
        code = class_code(rows.iloc[0])
        if settings.perturbation.positions_per_class == len(POSITIONS):
            return FractalClass(code, POSITIONS)
        return FractalClass(code, tuple(sorted({int(p) for p in rows["position"]})))

    def check_table(self, table: pd.DataFrame, name: str, settings: FineFractalDBConfig) -> None:
        check_codes_table(table, name)
        super().check_table(table, name, settings)

    def describe(self, settings: FineFractalDBConfig) -> dict[str, str]:
        render, class_filter = settings.render, settings.class_filter
        return {
            "classes x instances": f"{settings.n_classes} x {settings.instances_per_class} (seed {settings.seed})",
            "class codes": settings.sampler,
            "class filter": f"fill >= {class_filter.min_fill} at {class_filter.size} px" if class_filter.enabled else "off",
            "instance perturbation": f"one coefficient per map x U{list(settings.perturbation.factor_range)}",
            "rendering": f"{render.size} px, {render.points} points, {render.mode}",
        }

    def summary(self, table: pd.DataFrame, counts: Counter, settings: FineFractalDBConfig) -> dict:
        return {
            "sampler": settings.sampler,
            "class_codes_sampled": counts["codes_sampled"],
            "class_noncontractive_rejections": counts["noncontractive_codes"],
            "class_filter_rejections": counts["filter_rejections"],
            "class_acceptance_rate": (settings.n_classes + counts["replacements"]) / counts["codes_sampled"],
            "class_filter_acceptance_rate": class_filter_acceptance(counts),
            "instance_contraction_rejections": counts["invalid_rejections"],
            "n_maps": {str(k): int(v) for k, v in sorted(Counter(table.groupby("class_id")["n_maps"].first()).items())},
            "render": asdict(settings.render),
        }


FINEFRACTALDB = register_family(FineFractalDB())


def generate_finefractaldb(config: FineFractalDBConfig) -> tuple[pd.DataFrame, dict]:
    """The FineFractalDB table and its generation summary (:func:`fdsml.families.generation.generate_table`)."""
    return generate_table(FamilySpec(FINEFRACTALDB, config))
