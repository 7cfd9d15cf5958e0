"""Descriptor validation pipeline: triplet agreement and perturbation sweeps (docs/method.md §6)."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
