"""Thin nodes of the analysis pipeline: parse parameters, load the checkpoints, call ``fdsml.analysis``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from fdsml.analysis import pictures
from fdsml.analysis.config import AnalysisConfig, parse_analysis_params
from fdsml.analysis.grids import sample_grid_figure, triplet_grid
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.distributed import resolve_device

logger = logging.getLogger(__name__)


def _models(pretrained_model: dict[str, Any], config: AnalysisConfig):
    return pictures.load_models(config, pretrained_model, resolve_device(config.device))


def plot_embedding_maps(
    fractal_codes: pd.DataFrame, pretrained_model: dict[str, Any], params_fractals: dict, params: dict
) -> Figure:
    """UMAP of each checkpoint's embeddings of random fractal classes, one class's path shown as pictures.

    Inputs: the FineFractalDB table, the pre-trained model file, ``params:fractals`` (rendering and
    perturbation range), ``params:analysis``. Returns ``analysis_embedding_map``.
    """
    config = parse_analysis_params(params)
    spec = parse_fractals_params(params_fractals).spec
    models = _models(pretrained_model, config)
    return pictures.embedding_maps(models, fractal_codes, spec, spec.family.perturbation_range(spec.settings), config)


def trace_trajectories(
    fractal_codes: pd.DataFrame, pretrained_model: dict[str, Any], params_fractals: dict, params: dict
) -> tuple[Figure, dict]:
    """Interpolation between two codes, embedded by each checkpoint: ``analysis_trajectory`` and its smoothness."""
    config = parse_analysis_params(params)
    spec = parse_fractals_params(params_fractals).spec
    return pictures.trajectories(_models(pretrained_model, config), fractal_codes, spec, config)


def explain_resnets(pretrained_model: dict[str, Any], params: dict) -> tuple[Figure, Figure, dict]:
    """Grad-CAM of the ResNet checkpoints on real images: ``analysis_gradcam``, ``analysis_gradcam_similarity``, means."""
    config = parse_analysis_params(params)
    return pictures.gradcam_pictures(_models(pretrained_model, config), config)


def explain_vits(pretrained_model: dict[str, Any], params: dict) -> Figure:
    """CLS-to-patch attention of every block of the ViT checkpoints: ``analysis_attention``."""
    config = parse_analysis_params(params)
    return pictures.attention_picture(_models(pretrained_model, config), config)


def plot_sample_grid(fractal_codes: pd.DataFrame, params_fractals: dict, params: dict) -> Figure:
    """Sample fractals, rows = classes, columns = instances: ``analysis_sample_grid``."""
    settings = parse_analysis_params(params).grids
    spec = parse_fractals_params(params_fractals).spec
    return sample_grid_figure(fractal_codes, spec, settings.n_classes, settings.n_instances)


def plot_triplet_grid(fractal_codes: pd.DataFrame, params_fractals: dict, params: dict) -> Figure:
    """Sampled triplets per candidate filter, positive and negative marked: ``analysis_triplet_grid``."""
    config = parse_analysis_params(params)
    spec = parse_fractals_params(params_fractals).spec
    return triplet_grid(fractal_codes, spec, config.grids.triplets_per_filter, config.rng(3))


def collect_metrics(trajectory_metrics: dict, gradcam_metrics: dict, pretrained_model: dict[str, Any], params: dict) -> dict:
    """Trajectory smoothness and Grad-CAM similarity means in one JSON, with the pre-trained trunk they describe: ``analysis_metrics``."""
    return pictures.analysis_metrics(trajectory_metrics, gradcam_metrics, parse_analysis_params(params), pretrained_model)
