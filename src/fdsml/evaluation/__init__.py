"""Evaluation: retrieval and classification metrics, corruptions, pictures."""

from fdsml.evaluation.retrieval import retrieval_metrics

__all__ = ["retrieval_metrics"]
