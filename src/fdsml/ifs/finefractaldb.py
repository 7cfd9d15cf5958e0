"""FineFractalDB's settings, class-code search and table rows (docs/method.md §2).

The kernels of the first formula family: :mod:`fdsml.families.finefractaldb` puts them behind
the family interface, and :mod:`fdsml.families.generation` draws the table.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fdsml import fingerprints
from fdsml.config import ConfigError, require_fraction, require_positive, require_range, require_seed
from fdsml.errors import GenerationError
from fdsml.ifs.codes import (
    POSITIONS,
    class_positions,
    determinant_probabilities,
    is_contractive,
    random_perturbation,
    rescale_coefficient,
    sample_sigma_factor_code,
    sample_uniform_code,
)
from fdsml.ifs.descriptor import psi
from fdsml.ifs.render import RenderSettings, occupancy, render
from fdsml.seeds import SEED_LIMIT

TABLE_COLUMNS = (
    "class_id",
    "instance_id",
    "n_maps",
    "coefficients",
    "probabilities",
    "psi",
    "seed",
    "occupancy",
    "position",
    "factor",
)
MAP_COLUMN = "map"
"""The perturbed map, a column only of tables whose perturbation scope is ``one_map`` (the default
tables stay as they were)."""


@dataclass(frozen=True)
class SigmaFactorSampler:
    """Anderson & Farrell: N maps, sigma factor alpha ~ U[(lo + N) / 2, (hi + N) / 2]."""

    n_maps: tuple[int, int] = (2, 4)
    alpha_offsets: tuple[float, float] = (5.0, 6.0)
    translation: tuple[float, float] = (-1.0, 1.0)

    def __post_init__(self):
        require_range("fractals.sigma_factor.n_maps", self.n_maps, within=(1, 64))
        require_range("fractals.sigma_factor.alpha_offsets", self.alpha_offsets)
        require_range("fractals.sigma_factor.translation", self.translation)
        low_alpha = (self.alpha_offsets[0] + self.n_maps[0]) / 2
        high_alpha = (self.alpha_offsets[1] + self.n_maps[1]) / 2
        if low_alpha <= 0 or (self.alpha_offsets[1] + self.n_maps[0]) / 2 > 3 * self.n_maps[0]:
            raise ConfigError(
                "fractals.sigma_factor.alpha_offsets: the sigma factor must lie in (0, 3N] for every N; "
                f"got [{low_alpha}, {high_alpha}] for N in {list(self.n_maps)}"
            )

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        return sample_sigma_factor_code(rng, self.n_maps, self.alpha_offsets, self.translation)


@dataclass(frozen=True)
class UniformSampler:
    """FractalDB: every coefficient ~ U[low, high], N maps, each map redrawn until contractive."""

    n_maps: tuple[int, int] = (2, 7)
    coefficient_range: tuple[float, float] = (-1.0, 1.0)
    max_draws_per_map: int = 1000

    def __post_init__(self):
        require_range("fractals.uniform.n_maps", self.n_maps, within=(1, 64))
        require_range("fractals.uniform.coefficient_range", self.coefficient_range)
        require_positive("fractals.uniform.max_draws_per_map", self.max_draws_per_map)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        return sample_uniform_code(rng, self.n_maps, self.coefficient_range, self.max_draws_per_map)


@dataclass(frozen=True)
class ClassFilter:
    """FractalDB's search: keep a class whose single-pixel rendering fills at least ``min_fill``."""

    enabled: bool = True
    size: int = 512
    points: int = 100_000
    min_fill: float = 0.2
    max_attempts: int = 1000

    def __post_init__(self):
        require_positive("fractals.class_filter.size", self.size)
        require_positive("fractals.class_filter.points", self.points)
        require_fraction("fractals.class_filter.min_fill", self.min_fill)
        require_positive("fractals.class_filter.max_attempts", self.max_attempts)


@dataclass(frozen=True)
class Perturbation:
    """Instance draw: one coefficient position rescaled by a factor s (docs/method.md §2.2).

    The defaults are our first reading of the method: the position is any of the six, drawn per
    instance (``positions_per_class = 6``), rescaled in every map (``scope = every_map``) by
    s ~ U[factor_range] (``factor = uniform``). The variants the method leaves open: ``one_map``
    (the position rescaled in one map drawn per instance), ``discrete`` (s drawn from
    ``factor_values``, FractalDB's weights) and 1 to 5 positions per class, drawn with the class
    code, that its instances choose from.
    """

    scope: Literal["every_map", "one_map"] = "every_map"
    factor: Literal["uniform", "discrete"] = "uniform"
    factor_range: tuple[float, float] = (0.6, 1.4)
    factor_values: tuple[float, ...] = (0.2, 0.6, 1.4, 1.8)
    positions_per_class: int = len(POSITIONS)
    max_attempts: int = 100

    def __post_init__(self):
        require_range("fractals.perturbation.factor_range", self.factor_range)
        require_positive("fractals.perturbation.factor_range[0]", self.factor_range[0])
        if not self.factor_values:
            raise ConfigError("fractals.perturbation.factor_values: give at least one factor, e.g. [0.2, 0.6, 1.4, 1.8]")
        for index, value in enumerate(self.factor_values):
            require_positive(f"fractals.perturbation.factor_values[{index}]", value)
        if not 1 <= self.positions_per_class <= len(POSITIONS):
            raise ConfigError(
                f"fractals.perturbation.positions_per_class: must lie in 1..{len(POSITIONS)} "
                f"(6 = any position, per instance), got {self.positions_per_class}"
            )
        require_positive("fractals.perturbation.max_attempts", self.max_attempts)

    def draw(self, code: np.ndarray, rng: np.random.Generator, positions: tuple[int, ...]):
        """One perturbation of ``code`` at one of ``positions``: (coefficients, position, factor, map or None)."""
        values = self.factor_values if self.factor == "discrete" else None
        return random_perturbation(
            code, rng, self.factor_range, positions=positions, factor_values=values, one_map=self.scope == "one_map"
        )


@dataclass(frozen=True)
class FineFractalDBConfig:
    """Everything that determines the FineFractalDB table."""

    seed: int = 0
    n_classes: int = 10
    instances_per_class: int = 20
    sampler: Literal["sigma_factor", "uniform"] = "sigma_factor"
    sigma_factor: SigmaFactorSampler = field(default_factory=SigmaFactorSampler)
    uniform: UniformSampler = field(default_factory=UniformSampler)
    class_filter: ClassFilter = field(default_factory=ClassFilter)
    perturbation: Perturbation = field(default_factory=Perturbation)
    render: RenderSettings = field(default_factory=RenderSettings)
    min_occupancy: float = 0.0005
    max_class_replacements: int = 10
    workers: int = fingerprints.non_defining(default=1)

    def __post_init__(self):
        require_seed("fractals.seed", self.seed)
        require_positive("fractals.n_classes", self.n_classes)
        require_positive("fractals.instances_per_class", self.instances_per_class)
        require_fraction("fractals.min_occupancy", self.min_occupancy)
        if self.max_class_replacements < 0:
            raise ConfigError(f"fractals.max_class_replacements: must be >= 0, got {self.max_class_replacements}")
        require_positive("fractals.workers", self.workers)

    @property
    def code_sampler(self) -> SigmaFactorSampler | UniformSampler:
        return self.sigma_factor if self.sampler == "sigma_factor" else self.uniform

    @property
    def table_columns(self) -> tuple[str, ...]:
        """``TABLE_COLUMNS``, and ``MAP_COLUMN`` when each instance perturbs one map."""
        return TABLE_COLUMNS + ((MAP_COLUMN,) if self.perturbation.scope == "one_map" else ())


def sample_class_code(config: FineFractalDBConfig, rng: np.random.Generator, counts: Counter) -> np.ndarray:
    """Draw base codes until one is strictly contractive, non-singular and passes the class filter (tallied in ``counts``)."""
    class_filter = config.class_filter
    for _ in range(class_filter.max_attempts):
        counts["codes_sampled"] += 1
        code = config.code_sampler.sample(rng)
        if not is_contractive(code) or not np.any(np.linalg.det(code[:, :4].reshape(-1, 2, 2))):
            counts["noncontractive_codes"] += 1
            continue
        if not class_filter.enabled:
            return code
        image = render(
            code,
            determinant_probabilities(code),
            size=class_filter.size,
            points=class_filter.points,
            seed=int(rng.integers(SEED_LIMIT)),
            mode="point",
        )
        if occupancy(image) >= class_filter.min_fill:
            return code
        counts["filter_rejections"] += 1
    raise GenerationError(
        f"no class code passed the class filter in {class_filter.max_attempts} draws "
        f"(fractals.class_filter.min_fill={class_filter.min_fill}); raise fractals.class_filter.max_attempts "
        "or lower min_fill"
    )


def class_filter_acceptance(totals: Counter) -> float | None:
    """The fraction of sampled, contractive class codes the class filter keeps (None when none reached it)."""
    filtered = totals["codes_sampled"] - totals["noncontractive_codes"]
    return (filtered - totals["filter_rejections"]) / filtered if filtered else None


def instance_code(row) -> tuple[np.ndarray, np.ndarray]:
    """The ``(N, 6)`` coefficients and the probabilities of one table row."""
    return np.reshape(np.asarray(row["coefficients"], dtype=np.float64), (-1, 6)), np.asarray(row["probabilities"])


def row_perturbation(row) -> tuple[int, float, int | None]:
    """An instance row's perturbation: position, factor, and its map (None: every map, and
    every table without the ``map`` column)."""
    map_index = row.get(MAP_COLUMN)
    return int(row["position"]), float(row["factor"]), None if map_index is None else int(map_index)


def class_code(row) -> np.ndarray:
    """The class code an instance row was perturbed from: its perturbation undone."""
    position, factor, map_index = row_perturbation(row)
    return rescale_coefficient(instance_code(row)[0], position, 1.0 / factor, map_index)
