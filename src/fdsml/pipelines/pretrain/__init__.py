"""``pretrain``: FineFractalDB (reused when up to date), then PA-Triplet or FDSL pre-training."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
