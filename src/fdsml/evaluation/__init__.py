"""Evaluation: retrieval and classification metrics, corruptions, pictures."""

from fdsml.evaluation.classification import classification_metrics, robustness_errors, topk_accuracy
from fdsml.evaluation.corruptions import CORRUPTION_GROUPS, group_errors, read_cifar10_c, read_imagenet_c
from fdsml.evaluation.retrieval import retrieval_metrics

__all__ = [
    "CORRUPTION_GROUPS",
    "classification_metrics",
    "group_errors",
    "read_cifar10_c",
    "read_imagenet_c",
    "retrieval_metrics",
    "robustness_errors",
    "topk_accuracy",
]
