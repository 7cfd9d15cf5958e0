"""``report``: one Markdown report of every pipeline's results, beside their pictures."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
