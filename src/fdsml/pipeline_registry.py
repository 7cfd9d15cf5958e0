"""Project pipelines, discovered from ``fdsml.pipelines``."""

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline

STUDIES = ("tune", "study")
"""Pipelines that run a study (many runs, a storage that grows): asked for by name, never part of ``__default__`` or ``dvc repro``."""


def register_pipelines() -> dict[str, Pipeline]:
    """Every pipeline under ``fdsml.pipelines`` by its folder name; ``__default__`` runs them all but the studies."""
    pipelines = find_pipelines(raise_errors=True)
    pipelines["__default__"] = sum(pipeline for name, pipeline in pipelines.items() if name not in STUDIES)
    return pipelines
