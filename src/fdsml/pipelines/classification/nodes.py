"""Nodes of the ``classification`` pipeline: parse parameters, call ``fdsml.training.classification``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from fdsml.training.classification import parse_classification_params
from fdsml.training.classification_comparison import classification_comparison, comparison_table

logger = logging.getLogger(__name__)


def finetune_classifiers(pretrained_model: dict, params: dict[str, Any]) -> tuple[dict, dict, str, pd.DataFrame]:
    """Fine-tune every starting point on every dataset of ``params:classification``, each at its own rate, beside its
    baselines (nearest-centroid classifiers on raw pixels and on its frozen trunk).

    ``pretrained_model`` is the pre-training pipeline's model (starts whose checkpoint is
    ``pretrained_model`` use it).

    Returns the fine-tuned models (``fine_tuned_classifiers``: ``{"models": {"<dataset>/<start>":
    payload}}``), top-1 / top-5 per dataset and starting point with each dataset's folder (``classification_metrics``), the
    same as a Markdown table with the baselines and any "fine-tuning did not help" line (``classification_table``) and the training histories
    (``classification_history``).
    """
    config = parse_classification_params(params)
    models, metrics, history = classification_comparison(config, pretrained_model)
    datasets = {d.name: d.root for d in config.datasets}  # which folder each result's dataset was read from
    report = {"image_size": config.image_size, "seed": config.train.seed, "datasets": datasets, "results": metrics}
    return {"models": models}, report, comparison_table(metrics), history
