"""FineFractalDB generation: class codes, per-instance perturbations, rejection sampling (METHOD.md section 2).

Every class is generated independently from ``SeedSequence(seed, spawn_key=(class_id,))`` and
every instance from ``SeedSequence(seed, spawn_key=(class_id, replacement, instance_id))``, so
the table does not depend on how classes are spread over worker processes, and any class can be
rebuilt alone.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from typing import Literal

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from fdsml import reuse
from fdsml.config import ConfigError, require_fraction, require_positive, require_range, require_seed
from fdsml.errors import UserFixableError
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

logger = logging.getLogger(__name__)

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


class GenerationError(UserFixableError, RuntimeError):
    """A class could not be completed within the configured number of attempts."""


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
    """Instance draw: one coefficient position rescaled by a factor s (METHOD.md section 2).

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
    workers: int = reuse.non_defining(default=1)

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


def fingerprint(config: FineFractalDBConfig) -> str:
    """The table's reuse fingerprint (:mod:`fdsml.reuse`): its defining configuration and the generator's code."""
    return reuse.fingerprint(config, code=__name__)


def is_up_to_date(stored_codes: pd.DataFrame | None, stored_summary: dict | None, config: FineFractalDBConfig) -> bool:
    """True when a stored table exists, was generated from this very configuration and code, and is unedited."""
    return (
        stored_codes is not None
        and stored_summary is not None
        and stored_summary.get("fingerprint") == fingerprint(config)
        and stored_summary.get("table_digest") == reuse.content_digest(stored_codes)
    )


@dataclass
class ClassStats:
    """Rejection bookkeeping of one class."""

    codes_sampled: int = 0
    noncontractive_codes: int = 0
    filter_rejections: int = 0
    replacements: int = 0
    instance_draws: int = 0
    contraction_rejections: int = 0
    occupancy_rejections: int = 0


def sample_class_code(config: FineFractalDBConfig, rng: np.random.Generator, stats: ClassStats) -> np.ndarray:
    """Draw base codes until one is strictly contractive, non-singular and passes the class filter."""
    class_filter = config.class_filter
    for _ in range(class_filter.max_attempts):
        stats.codes_sampled += 1
        code = config.code_sampler.sample(rng)
        if not is_contractive(code) or not np.any(np.linalg.det(code[:, :4].reshape(-1, 2, 2))):
            stats.noncontractive_codes += 1
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
        stats.filter_rejections += 1
    raise GenerationError(
        f"no class code passed the class filter in {class_filter.max_attempts} draws "
        f"(fractals.class_filter.min_fill={class_filter.min_fill}); raise fractals.class_filter.max_attempts "
        "or lower min_fill"
    )


def make_instance(
    config: FineFractalDBConfig,
    code: np.ndarray,
    rng: np.random.Generator,
    stats: ClassStats,
    positions: tuple[int, ...] = POSITIONS,
):
    """One accepted perturbation of ``code`` at one of ``positions`` as a row dict, or None when
    every attempt was rejected."""
    for _ in range(config.perturbation.max_attempts):
        stats.instance_draws += 1
        coefficients, position, factor, map_index = config.perturbation.draw(code, rng, positions)
        if not is_contractive(coefficients):
            stats.contraction_rejections += 1
            continue
        probabilities = determinant_probabilities(coefficients)
        seed = int(rng.integers(SEED_LIMIT))
        filled = occupancy(config.render.render(coefficients, probabilities, seed))
        if filled < config.min_occupancy:
            stats.occupancy_rejections += 1
            continue
        row = {
            "n_maps": coefficients.shape[0],
            "coefficients": coefficients.reshape(-1).tolist(),
            "probabilities": probabilities.tolist(),
            "psi": psi(coefficients, probabilities).tolist(),
            "seed": seed,
            "occupancy": filled,
            "position": position,
            "factor": factor,
        }
        if map_index is not None:
            row[MAP_COLUMN] = map_index
        return row
    return None


def generate_class(config: FineFractalDBConfig, class_id: int) -> tuple[list[dict], ClassStats]:
    """All instances of one class; the class code is replaced when an instance keeps failing."""
    stats = ClassStats()
    class_rng = np.random.default_rng(np.random.SeedSequence(config.seed, spawn_key=(class_id,)))
    for replacement in range(config.max_class_replacements + 1):
        stats.replacements = replacement
        code = sample_class_code(config, class_rng, stats)
        positions = class_positions(class_rng, config.perturbation.positions_per_class)
        rows = []
        for instance_id in range(config.instances_per_class):
            sequence = np.random.SeedSequence(config.seed, spawn_key=(class_id, replacement, instance_id))
            row = make_instance(config, code, np.random.default_rng(sequence), stats, positions)
            if row is None:
                break
            rows.append({"class_id": class_id, "instance_id": instance_id, **row})
        else:
            return rows, stats
        logger.debug("class %d: instance failed %d times, replacing the class code", class_id, config.perturbation.max_attempts)
    raise GenerationError(
        f"class {class_id}: an instance failed {config.perturbation.max_attempts} draws in each of "
        f"{config.max_class_replacements + 1} class codes; raise fractals.max_class_replacements or "
        "fractals.perturbation.max_attempts, or lower fractals.min_occupancy"
    )


def _generate_class_job(args):
    return generate_class(*args)


def generate_finefractaldb(config: FineFractalDBConfig) -> tuple[pd.DataFrame, dict]:
    """The FineFractalDB table (one row per instance, ``config.table_columns``) and its generation summary."""
    started = time.perf_counter()
    jobs = [(config, class_id) for class_id in range(config.n_classes)]
    progress = dict(total=config.n_classes, desc="FineFractalDB classes", unit="class")
    if config.workers == 1:
        results = [generate_class(*job) for job in tqdm(jobs, **progress)]
    else:
        with ProcessPoolExecutor(config.workers, mp_context=get_context("spawn")) as pool:
            chunk = max(1, config.n_classes // (8 * config.workers))
            results = list(tqdm(pool.map(_generate_class_job, jobs, chunksize=chunk), **progress))
    rows = [row for class_rows, _ in results for row in class_rows]
    table = pd.DataFrame(rows, columns=list(config.table_columns))
    summary = summarize(table, [stats for _, stats in results], config, time.perf_counter() - started)
    logger.info(
        "FineFractalDB: %d classes x %d instances in %.1f s", config.n_classes, config.instances_per_class, summary["seconds"]
    )
    return table, summary


def summarize(table: pd.DataFrame, stats: list[ClassStats], config: FineFractalDBConfig, seconds: float) -> dict:
    """Counts, acceptance and rejection rates, occupancy statistics and time taken."""
    totals = Counter()
    for class_stats in stats:
        totals.update(vars(class_stats))
    occupancies = table["occupancy"].to_numpy()
    codes_sampled = totals["codes_sampled"]
    instance_draws = totals["instance_draws"]
    return {
        "n_classes": config.n_classes,
        "instances_per_class": config.instances_per_class,
        "n_instances": int(len(table)),
        "sampler": config.sampler,
        "class_codes_sampled": codes_sampled,
        "class_noncontractive_rejections": totals["noncontractive_codes"],
        "class_filter_rejections": totals["filter_rejections"],
        "class_acceptance_rate": (config.n_classes + totals["replacements"]) / codes_sampled,
        "class_filter_acceptance_rate": class_filter_acceptance(totals),
        "class_replacements": totals["replacements"],
        "instance_draws": instance_draws,
        "instance_contraction_rejections": totals["contraction_rejections"],
        "instance_occupancy_rejections": totals["occupancy_rejections"],
        "instance_acceptance_rate": len(table) / instance_draws,
        "occupancy": {
            "min": float(occupancies.min()),
            "mean": float(occupancies.mean()),
            "median": float(np.median(occupancies)),
            "max": float(occupancies.max()),
        },
        "n_maps": {str(k): int(v) for k, v in sorted(Counter(table.groupby("class_id")["n_maps"].first()).items())},
        "render": asdict(config.render),
        "fingerprint": fingerprint(config),
        "table_digest": reuse.content_digest(table),
        "seconds": round(seconds, 3),
    }


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


def render_rows(table: pd.DataFrame, settings: RenderSettings) -> np.ndarray:
    """Render table rows with their stored seeds: ``(len(table), size, size)`` uint8."""
    images = np.empty((len(table), settings.size, settings.size), dtype=np.uint8)
    for out, (_, row) in zip(images, table.iterrows()):
        out[...] = settings.render(*instance_code(row), int(row["seed"]))
    return images


def _render_rows_job(args):
    return render_rows(*args)


def render_shards(table: pd.DataFrame, settings: RenderSettings, shard_size: int, workers: int = 1):
    """Yield the renderings of the table in row order, ``shard_size`` rows at a time."""
    jobs = [(table.iloc[start : start + shard_size], settings) for start in range(0, len(table), shard_size)]
    progress = dict(total=len(jobs), desc="Rendering shards", unit="shard")
    if workers == 1:
        yield from tqdm(map(_render_rows_job, jobs), **progress)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        yield from tqdm(pool.map(_render_rows_job, jobs), **progress)


def shards_fingerprint(table: pd.DataFrame, settings: RenderSettings) -> str:
    """The reuse fingerprint of :func:`render_shards`' output: the table's content, the settings, the renderer's code."""
    return reuse.fingerprint(settings, code=__name__, inputs={"codes": reuse.content_digest(table)})


def sample_grid(table: pd.DataFrame, settings: RenderSettings, n_classes: int, n_instances: int, border: int = 2) -> np.ndarray:
    """A picture of the dataset: rows = the first classes, columns = their first instances."""
    classes = sorted(table["class_id"].unique())[:n_classes]
    chosen = table[table["class_id"].isin(classes) & (table["instance_id"] < n_instances)]
    columns = int(chosen["instance_id"].max()) + 1
    tile = settings.size + border
    grid = np.full((len(classes) * tile + border, columns * tile + border), 255, dtype=np.uint8)
    images = render_rows(chosen, settings)
    for image, (_, row) in zip(images, chosen.iterrows()):
        top = classes.index(row["class_id"]) * tile + border
        left = int(row["instance_id"]) * tile + border
        grid[top : top + settings.size, left : left + settings.size] = image
    return grid
