"""``retrieval``: fine-tune starting points with a proxy loss, compare Recall@K, MAP@R, R-Precision, NMI."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
