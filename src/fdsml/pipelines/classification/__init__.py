"""``classification``: fine-tune starting points on classification datasets, top-1 / top-5 on their test splits."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
