"""Nodes of the ``retrieval`` pipeline: parse parameters, call ``fdsml.training.retrieval``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from fdsml.models import model_from_payload
from fdsml.training.retrieval import load_splits, parse_retrieval_params, retrieval_examples
from fdsml.training.retrieval_comparison import comparison_table, retrieval_comparison

logger = logging.getLogger(__name__)


def finetune_starting_points(pretrained_model: dict, params: dict[str, Any]) -> tuple[dict, pd.DataFrame, dict]:
    """Fine-tune every starting point of ``params:retrieval`` with every seed at its own rate and evaluate it beside its
    baselines (raw pixels, its frozen trunk).

    ``pretrained_model`` is the pre-training pipeline's model file (starts whose checkpoint is
    ``pretrained_model`` use it). Returns the metrics (``retrieval_metrics``), the training
    histories (``retrieval_history``) and the first seed's models (``retrieval_models``).
    """
    config = parse_retrieval_params(params)
    metrics, history, models = retrieval_comparison(config, pretrained_model)
    return metrics, history, {"models": models}


def tabulate_retrieval(metrics: dict) -> str:
    """The Markdown comparison table (``retrieval_table``): raw pixels, each start frozen and fine-tuned with its rate,
    the differences to the baselines and every "fine-tuning did not help" line."""
    return comparison_table(metrics)


def draw_retrieval_examples(retrieval_models: dict, params: dict[str, Any]):
    """Top-5 retrievals of a few queries for the first starting point (``retrieval_examples``)."""
    config = parse_retrieval_params(params)
    name, payload = next(iter(retrieval_models["models"].items()))
    logger.info("Drawing top-5 retrievals of %s", name)
    return retrieval_examples(model_from_payload(payload), load_splits(config), config)
