"""The descriptor validation's settings (``params:validate_descriptor``) and its two measurements on a table:
the triplet agreement per candidate filter and the perturbation sweeps. The ``validate_descriptor`` pipeline's
nodes and the generator study (:mod:`fdsml.tuning.study_steps`) both call them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from fdsml.config import ConfigError, parse, require_positive, require_range, require_seed
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.data.holdout import split_table
from fdsml.families import FamilySpec
from fdsml.seeds import generator
from fdsml.descriptor_validation.agreement import measure_all_filters
from fdsml.descriptor_validation.sweeps import base_codes, run_sweeps, sweep_factors

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


def parse_validate_descriptor_params(params: dict) -> ValidateDescriptorConfig:
    """Validate ``params:validate_descriptor``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(ValidateDescriptorConfig, params, "validate_descriptor")


def validated_rows(table: pd.DataFrame, params_fractals: dict, config: ValidateDescriptorConfig) -> pd.DataFrame:
    """The rows ``validate_descriptor.rows`` names, renumbered from 0 (every measurement draws from the same rows)."""
    if config.rows == "all":
        return table
    fractals = parse_fractals_params(params_fractals)
    if fractals.holdout.class_fraction == 0:
        raise ConfigError(
            "validate_descriptor.rows: heldout_classes needs held-out classes; set fractals.holdout.class_fraction above 0 "
            "or validate_descriptor.rows: all"
        )
    fractals.spec.check_table(table)
    split = split_table(table, fractals.holdout, fractals.spec.settings.seed)
    return table.iloc[split.heldout_classes].reset_index(drop=True)


def triplet_agreement(table: pd.DataFrame, spec: FamilySpec, config: ValidateDescriptorConfig) -> pd.DataFrame:
    """Sample and measure ``n_triplets`` triplets per candidate filter: d_Psi and D to the anchor."""
    spec.check_table(table)
    triplets = measure_all_filters(table, spec, config.n_triplets, config.rng(0), config.chunk_size)
    logger.info("Measured %d triplets per filter at %d px", config.n_triplets, spec.size)
    return triplets


def sweep_points(table: pd.DataFrame, spec: FamilySpec, config: ValidateDescriptorConfig) -> pd.DataFrame:
    """Perturbation sweeps of every sweep parameter of ``n_base_codes`` class codes, for each seeding asked for."""
    spec.check_table(table)
    bases, class_ids = base_codes(table, spec, config.n_base_codes, config.rng(1))
    factors = sweep_factors(config.sweep.factor_range, config.sweep.n_factors)
    seedings = [config.sweep.common_random_numbers]
    if config.sweep.compare_fresh_seeds:
        seedings.append(not config.sweep.common_random_numbers)
    frames = [run_sweeps(bases, class_ids, factors, spec, config.rng(2), config.sweep.n_noise_seeds, common) for common in seedings]
    seeding = " and ".join(frame["seeding"].iloc[0] for frame in frames)
    n_sweeps = len(spec.family.sweep_parameters(spec.settings)) * len(bases)
    logger.info("Ran %d sweeps of %d factors (%s seeding)", n_sweeps, len(factors), seeding)
    return pd.concat(frames, ignore_index=True)
