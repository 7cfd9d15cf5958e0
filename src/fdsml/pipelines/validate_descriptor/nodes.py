"""Thin nodes of the descriptor validation: parse parameters, call ``fdsml.validation``."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fdsml.config import ConfigError, parse, require_positive, require_range, require_seed
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.data.holdout import split_table
from fdsml.families import FamilySpec, family_spec
from fdsml.reuse import defining_configuration
from fdsml.seeds import generator
from fdsml.validation.agreement import measure_all_filters, summarise_agreement
from fdsml.validation.plots import scatter_figure, sweep_figure, triplet_examples, triplet_grid_figure
from fdsml.validation.report import markdown_report
from fdsml.validation.sweeps import base_codes, run_sweeps, summarise_sweeps, sweep_factors

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepConfig:
    """Perturbation sweeps: factor grid, noise-floor re-renderings and seeding."""

    factor_range: tuple[float, float] = (0.6, 1.4)
    n_factors: int = 33
    n_noise_seeds: int = 4
    common_random_numbers: bool = True
    compare_fresh_seeds: bool = True
    plot_base: int = 0

    def __post_init__(self):
        require_range("validate_descriptor.sweep.factor_range", self.factor_range)
        require_positive("validate_descriptor.sweep.factor_range[0]", self.factor_range[0])
        require_positive("validate_descriptor.sweep.n_noise_seeds", self.n_noise_seeds)
        try:
            sweep_factors(self.factor_range, self.n_factors)
        except ValueError as error:
            raise ConfigError(f"validate_descriptor.sweep.n_factors: {error}") from error
        if self.plot_base < 0:
            raise ConfigError(f"validate_descriptor.sweep.plot_base: must be >= 0, got {self.plot_base}")


@dataclass(frozen=True)
class ValidateDescriptorConfig:
    """Everything the descriptor validation draws and measures."""

    seed: int = 0
    n_triplets: int = 1100
    n_base_codes: int = 5
    chunk_size: int = 256
    grid_triplets_per_filter: int = 3
    rows: Literal["all", "heldout_classes"] = "all"  # heldout_classes: only the classes pre-training holds out whole
    sweep: SweepConfig = field(default_factory=SweepConfig)

    def __post_init__(self):
        require_seed("validate_descriptor.seed", self.seed)
        require_positive("validate_descriptor.n_triplets", self.n_triplets)
        require_positive("validate_descriptor.n_base_codes", self.n_base_codes)
        require_positive("validate_descriptor.chunk_size", self.chunk_size)
        require_positive("validate_descriptor.grid_triplets_per_filter", self.grid_triplets_per_filter)
        if self.sweep.plot_base >= self.n_base_codes:
            raise ConfigError(
                f"validate_descriptor.sweep.plot_base: {self.sweep.plot_base} is not one of the "
                f"{self.n_base_codes} base codes"
            )

    def rng(self, stream: int) -> np.random.Generator:
        """Independent generator per job (0 triplets, 1 base-code choice, 2 sweep seeds: the same for both seedings)."""
        return generator(self.seed, "descriptor_validation", stream)


def _config(params: dict) -> ValidateDescriptorConfig:
    return parse(ValidateDescriptorConfig, params, "validate_descriptor")


def _spec(params_fractals: dict) -> FamilySpec:
    """The family and its settings: the validation renders and describes instances as the dataset does."""
    return family_spec(params_fractals, "fractals")


def validated_rows(fractal_codes: pd.DataFrame, params_fractals: dict, config: ValidateDescriptorConfig) -> pd.DataFrame:
    """The rows ``validate_descriptor.rows`` names, renumbered from 0 (every node draws from the same rows)."""
    if config.rows == "all":
        return fractal_codes
    fractals = parse_fractals_params(params_fractals)
    if fractals.holdout.class_fraction == 0:
        raise ConfigError(
            "validate_descriptor.rows: heldout_classes needs held-out classes; set fractals.holdout.class_fraction above 0 "
            "or validate_descriptor.rows: all"
        )
    split = split_table(fractal_codes, fractals.holdout, fractals.spec.settings.seed)
    return fractal_codes.iloc[split.heldout_classes].reset_index(drop=True)


def measure_triplet_agreement(fractal_codes: pd.DataFrame, params_fractals: dict, params: dict) -> pd.DataFrame:
    """Sample and measure ``n_triplets`` triplets per candidate filter: d_Psi and D to the anchor."""
    config = _config(params)
    spec = _spec(params_fractals)
    spec.check_table(fractal_codes)
    fractal_codes = validated_rows(fractal_codes, params_fractals, config)
    triplets = measure_all_filters(fractal_codes, spec, config.n_triplets, config.rng(0), config.chunk_size)
    logger.info("Measured %d triplets per filter at %d px", config.n_triplets, spec.size)
    return triplets


def measure_sweeps(fractal_codes: pd.DataFrame, params_fractals: dict, params: dict) -> pd.DataFrame:
    """Perturbation sweeps of every sweep parameter of ``n_base_codes`` class codes, for each seeding asked for."""
    config = _config(params)
    spec = _spec(params_fractals)
    spec.check_table(fractal_codes)
    fractal_codes = validated_rows(fractal_codes, params_fractals, config)
    bases, class_ids = base_codes(fractal_codes, spec, config.n_base_codes, config.rng(1))
    factors = sweep_factors(config.sweep.factor_range, config.sweep.n_factors)
    seedings = [config.sweep.common_random_numbers]
    if config.sweep.compare_fresh_seeds:
        seedings.append(not config.sweep.common_random_numbers)
    frames = [
        run_sweeps(bases, class_ids, factors, spec, config.rng(2), config.sweep.n_noise_seeds, common)
        for common in seedings
    ]
    seeding = " and ".join(frame["seeding"].iloc[0] for frame in frames)
    n_sweeps = len(spec.family.sweep_parameters(spec.settings)) * len(bases)
    logger.info("Ran %d sweeps of %d factors (%s seeding)", n_sweeps, len(factors), seeding)
    return pd.concat(frames, ignore_index=True)


def summarise(triplets: pd.DataFrame, sweep_points: pd.DataFrame, params_fractals: dict, params: dict) -> tuple[dict, str]:
    """The JSON summary (agreement per filter, sweeps per seeding, settings) and its Markdown table."""
    config = _config(params)
    summary = summarise_agreement(triplets)
    summary["n_triplets"] = config.n_triplets
    primary = "common" if config.sweep.common_random_numbers else "fresh"
    for seeding, points in sweep_points.groupby("seeding"):
        summary["sweeps" if seeding == primary else f"sweeps_{seeding}_seeds"] = summarise_sweeps(points)
    spec = _spec(params_fractals)
    summary["settings"] = {"validate_descriptor": asdict(config), "family": spec.name, "fractals": defining_configuration(spec.settings)}
    agreement = ", ".join(f"{k} {100 * v:.1f} %" for k, v in summary["agreement"].items())
    logger.info("Descriptor agreement with rendered shape: %s", agreement)
    return summary, markdown_report(summary)


def _sweep_names(params_fractals: dict) -> tuple[str, ...]:
    spec = _spec(params_fractals)
    return spec.family.sweep_parameters(spec.settings)


def plot_sweeps(sweep_points: pd.DataFrame, params_fractals: dict, params: dict) -> Figure:
    """D versus s for the configured base code, one panel per sweep parameter."""
    return sweep_figure(sweep_points, _config(params).sweep.plot_base, _sweep_names(params_fractals))


def plot_scatter(sweep_points: pd.DataFrame, params_fractals: dict, params: dict) -> Figure:
    """D versus d_Psi over the primary-seeding sweep points, coloured by sweep parameter."""
    primary = "common" if _config(params).sweep.common_random_numbers else "fresh"
    return scatter_figure(sweep_points[sweep_points["seeding"] == primary], _sweep_names(params_fractals))


def plot_triplet_grid(triplets: pd.DataFrame, fractal_codes: pd.DataFrame, params_fractals: dict, params: dict) -> Figure:
    """A few measured triplets per filter with the descriptor's positive and negative marked."""
    config = _config(params)
    fractal_codes = validated_rows(fractal_codes, params_fractals, config)
    examples = triplet_examples(triplets, fractal_codes, _spec(params_fractals), config.grid_triplets_per_filter)
    return triplet_grid_figure(examples)
