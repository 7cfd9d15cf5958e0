"""``study``: run a study file of conf/studies/ (``kedro run --pipelines=study --params=study.name=<name>``; docs/studies.md)."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
