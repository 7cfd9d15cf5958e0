"""``fractals``: FineFractalDB codes, descriptors, summary, sample grid and optional renderings."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
