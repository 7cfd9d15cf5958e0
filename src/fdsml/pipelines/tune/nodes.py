"""Nodes of the ``tune`` pipeline: run the study (``fdsml.tuning``), then tabulate and draw it."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fdsml.config import with_overlay
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.data.holdout import split_table
from fdsml.tuning.config import parse_tune_params
from fdsml.tuning.objective import TrialInputs, TrialObjective
from fdsml.tuning.outputs import best_overlay, study_markdown, study_pictures, trials_table
from fdsml.tuning.study import load_study, run_study

OVERLAY = "tune_best_params"


def run_tuning_study(
    fractal_codes: pd.DataFrame,
    fractal_images: dict[str, Any],
    fractals_params: dict[str, Any],
    pretrain_params: dict[str, Any],
    retrieval_params: dict[str, Any],
    tune_params: dict[str, Any],
) -> tuple[pd.DataFrame, dict, str]:
    """Run ``params:tune``'s study to its budget (adding to the trials its storage holds).

    Each trial pre-trains on the fractals pipeline's table (and fine-tunes when the metric is
    retrieval's) with its parameters overlaid on ``params:pretrain`` / ``params:retrieval`` (with ``tune.arm``'s
    pretrain keys first).
    Returns every trial (``tune_trials``), the best one's parameters as a YAML overlay
    (``tune_best_params``) and the study in Markdown (``tune_table``).
    """
    config = parse_tune_params(tune_params)
    fractals = parse_fractals_params(fractals_params)
    spec = fractals.spec
    spec.check_table(fractal_codes)
    inputs = TrialInputs(
        fractal_codes,
        spec,
        split_table(fractal_codes, fractals.holdout, spec.settings.seed),
        shards=fractal_images if fractal_images.get("materialized") else None,
    )
    pretrain_params = with_overlay(pretrain_params, config.arm_pretrain)  # tune.arm: the keys every trial of the arm keeps
    study = run_study(TrialObjective(config, {"pretrain": pretrain_params, "retrieval": retrieval_params}, inputs))
    table = trials_table(study)
    return table, best_overlay(study), study_markdown(study, table, OVERLAY)


def draw_tuning_study(tune_trials: pd.DataFrame, tune_params: dict[str, Any]):
    """Optimisation history, parameter importances and a slice plot per parameter of the study (every worker's trials)."""
    return study_pictures(load_study(parse_tune_params(tune_params)))
