"""Thin nodes of the descriptor validation: parse parameters, call ``fdsml.descriptor_validation``."""

from __future__ import annotations

import logging
from dataclasses import asdict

import pandas as pd
from matplotlib.figure import Figure

from fdsml.families import FamilySpec, family_spec
from fdsml.fingerprints import defining_configuration
from fdsml.descriptor_validation.agreement import summarise_agreement
from fdsml.descriptor_validation import measure
from fdsml.descriptor_validation.plots import scatter_figure, sweep_figure, triplet_examples, triplet_grid_figure
from fdsml.descriptor_validation.report import markdown_report
from fdsml.descriptor_validation.sweeps import summarise_sweeps

logger = logging.getLogger(__name__)


def _config(params: dict) -> measure.ValidateDescriptorConfig:
    return measure.parse_validate_descriptor_params(params)


def _spec(params_fractals: dict) -> FamilySpec:
    """The family and its settings: the validation renders and describes instances as the dataset does."""
    return family_spec(params_fractals, "fractals")


def measure_triplet_agreement(fractal_codes: pd.DataFrame, params_fractals: dict, params: dict) -> pd.DataFrame:
    """Sample and measure ``n_triplets`` triplets per candidate filter: d_Psi and D to the anchor."""
    config = _config(params)
    return measure.triplet_agreement(measure.validated_rows(fractal_codes, params_fractals, config), _spec(params_fractals), config)


def measure_sweeps(fractal_codes: pd.DataFrame, params_fractals: dict, params: dict) -> pd.DataFrame:
    """Perturbation sweeps of every sweep parameter of ``n_base_codes`` class codes, for each seeding asked for."""
    config = _config(params)
    return measure.sweep_points(measure.validated_rows(fractal_codes, params_fractals, config), _spec(params_fractals), config)


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
    fractal_codes = measure.validated_rows(fractal_codes, params_fractals, config)
    examples = triplet_examples(triplets, fractal_codes, _spec(params_fractals), config.grid_triplets_per_filter)
    return triplet_grid_figure(examples)
