"""Nodes of the ``pretrain`` pipeline: parse parameters, call ``fdsml.training.pretrain``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from fdsml.data.fractals_config import parse_fractals_params
from fdsml.data.holdout import split_table
from fdsml.reporting.history import describe_loss_trend, measured_change, validation_cost
from fdsml.training.pretrain import parse_pretrain_params, pretrain, trained_heldout_metric

logger = logging.getLogger(__name__)


def pretrain_model(
    fractal_codes: pd.DataFrame,
    fractal_images: dict[str, Any],
    fractals_params: dict[str, Any],
    pretrain_params: dict[str, Any],
) -> tuple[dict, pd.DataFrame]:
    """Pre-train a backbone on the selected formula family (FineFractalDB by default) with PA-Triplet or the FDSL cross-entropy baseline.

    Inputs: the instance table, the materialised renderings (used when ``pretrain.data.source``
    is ``shards``), ``params:fractals`` (the family and its settings, the held-out split) and
    ``params:pretrain``. Returns the model file (``pretrained_model``) and the per-step history
    (``pretrain_history``).
    """
    fractals = parse_fractals_params(fractals_params)
    spec = fractals.spec
    config = parse_pretrain_params(pretrain_params)
    spec.check_table(fractal_codes)
    payload, history = pretrain(
        fractal_codes,
        spec,
        config,
        shards=fractal_images if fractal_images.get("materialized") else None,
        split=split_table(fractal_codes, fractals.holdout, spec.settings.seed),
    )
    if len(history):
        logger.info("Pre-training %s", describe_loss_trend(history))
    probe = measured_change(history, "val_probe_recall_at_1")
    if probe is not None:
        logger.info("Frozen probe Recall@1 (%s): %s", config.validation.probe.dataset, probe)
    trained = trained_heldout_metric(config)
    change = measured_change(history, trained)
    if change is not None:
        logger.info("Held-out %s, what %s trains for: %s", trained.removeprefix("val_"), config.objective, change)
    cost = validation_cost(history)
    if cost is not None:
        logger.info("Validation took %.1f %% of the steps' time", 100 * cost)
    return payload, history
