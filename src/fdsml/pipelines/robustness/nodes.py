"""Nodes of the ``robustness`` pipeline: parse parameters, call ``fdsml.evaluation.robustness``.

The corrupted test set is a catalog dataset (array shards): generated once from the clean
test split and reused while its fingerprint matches. When the released CIFAR-10-C / ImageNet-C
files are at ``released_root`` they are read in place instead, and the stored set only says so.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fdsml.evaluation import robustness
from fdsml.evaluation.robustness import parse_robustness_params
from fdsml.training.classification import parse_classification_params
from fdsml.distributed import setup


def _parse(classification_params: dict, robustness_params: dict):
    config, classification = parse_robustness_params(robustness_params), parse_classification_params(classification_params)
    return config, classification, robustness.find_dataset(config, classification.datasets)


def prepare_corrupted_test_set(classification_params: dict, robustness_params: dict, stored: dict | None) -> dict[str, Any]:
    """The corrupted test set (``corrupted_test_set``), at the classifiers' test view; ``stored``: the previous one or None."""
    config, classification, dataset = _parse(classification_params, robustness_params)
    view = (classification.image_size, classification.augment.crop_fraction)
    return robustness.corrupted_test_set(config, dataset, classification.train.seed, view, stored)


def evaluate_robustness(
    fine_tuned_classifiers: dict, corrupted_test_set: dict, classification_params: dict, robustness_params: dict
) -> tuple[pd.DataFrame, dict, str]:
    """Every fine-tuned classifier of ``robustness.dataset``: ``robustness_errors``, ``robustness_metrics``, ``robustness_table``."""
    config, classification, dataset = _parse(classification_params, robustness_params)
    models, device = fine_tuned_classifiers["models"].values(), setup(config.device).device
    return robustness.evaluate_robustness(models, corrupted_test_set, config, dataset, classification.train.seed, device)


def plot_corruption_examples(corrupted_test_set: dict, robustness_params: dict):
    """One test image under every corruption and severity (``corruption_examples``)."""
    return robustness.corruption_examples(corrupted_test_set, parse_robustness_params(robustness_params))
