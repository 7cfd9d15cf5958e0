"""``export``: the pre-trained trunk as a folder any timm project loads (``local-dir:``), with its model card."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
