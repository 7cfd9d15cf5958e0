"""Project pipelines, discovered from ``fdsml.pipelines``."""

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline


def register_pipelines() -> dict[str, Pipeline]:
    """Every pipeline under ``fdsml.pipelines`` by its folder name; ``__default__`` runs them all."""
    pipelines = find_pipelines(raise_errors=True)
    pipelines["__default__"] = sum(pipelines.values())
    return pipelines
