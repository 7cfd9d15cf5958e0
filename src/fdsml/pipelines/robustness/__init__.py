"""``robustness``: fine-tuned classifiers' error under common corruptions, per corruption group."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
