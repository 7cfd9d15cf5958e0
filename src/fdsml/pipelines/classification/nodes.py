"""Nodes of the ``classification`` pipeline: parse parameters, call ``fdsml.training.classification``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from fdsml.training.classification import metrics_table, parse_classification_params, run_classification

logger = logging.getLogger(__name__)


def finetune_classifiers(pretrained_model: dict, params: dict[str, Any]) -> tuple[dict, dict, str, pd.DataFrame]:
    """Fine-tune every starting point on every dataset of ``params:classification``.

    ``pretrained_model`` is the pre-training pipeline's model (starts whose checkpoint is
    ``pretrained_model`` use it).

    Returns the fine-tuned models (``fine_tuned_classifiers``: ``{"models": {"<dataset>/<start>":
    payload}}``), top-1 / top-5 per dataset and starting point with each dataset's folder (``classification_metrics``), the
    same as a Markdown table (``classification_table``) and the training histories
    (``classification_history``).
    """
    config = parse_classification_params(params)
    models, metrics, history = run_classification(config, pretrained_model)
    datasets = {d.name: d.root for d in config.datasets}  # which folder each result's dataset was read from
    report = {"image_size": config.image_size, "seed": config.train.seed, "datasets": datasets, "results": metrics}
    return {"models": models}, report, metrics_table(metrics), history
