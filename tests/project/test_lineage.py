"""Every artefact is a catalog entry with a file, and DVC tracks exactly the catalog's files, in data-flow order."""

import pytest
import yaml
from kedro.config import OmegaConfigLoader
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from fdsml.pipeline_registry import STUDIES
from fdsml.training.live import LIVE_FILES

from tests.support import ROOT

TRANSIENT = {  # node outputs deliberately kept in memory: partial metrics merged into analysis_metrics
    "analysis_trajectory_metrics",
    "analysis_gradcam_metrics",
}


@pytest.fixture(scope="module")
def project():
    bootstrap_project(ROOT)
    loader = OmegaConfigLoader(str(ROOT / "conf"), base_env="base", default_run_env="base")
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return dict(pipelines), loader["catalog"], loader["parameters"], stages


def _dvc_paths(stage: dict, *kinds: str) -> list[str]:
    paths = []
    for kind in kinds:
        for entry in stage.get(kind, []):
            paths.append(entry if isinstance(entry, str) else next(iter(entry)))
    return paths


def test_every_node_output_is_a_catalog_entry_with_a_file(project):
    registered, catalog, _, _ = project
    missing = sorted(
        f"{name}: {output}"
        for name, pipeline in registered.items()
        for node in pipeline.nodes
        for output in node.outputs
        if output not in TRANSIENT and "filepath" not in catalog.get(output, {})
    )
    assert not missing, f"node outputs with no catalog file: {missing}"


def test_dvc_tracks_exactly_the_catalog_files(project):
    """Every pipeline's files but a study's (its storage grows with every run: not a reproducible stage)."""
    registered, catalog, parameters, stages = project
    staged = {name: pipeline for name, pipeline in registered.items() if name not in STUDIES}
    produced = {output for pipeline in staged.values() for node in pipeline.nodes for output in node.outputs}
    catalog_files = {catalog[name]["filepath"] for name in produced if name in catalog}
    sections = [section for section in parameters if section not in STUDIES]
    run_dirs = {parameters[section]["run_dir"] for section in sections if "run_dir" in parameters[section]}
    live_files = {f"{parameters[section]['live_dir']}/{name}" for section in sections if parameters[section].get("live_dir") for name in LIVE_FILES}
    dvc_files = {path for stage in stages.values() for path in _dvc_paths(stage, "outs", "metrics", "plots")}
    assert catalog_files - dvc_files == set(), "catalog files no DVC stage produces"
    assert live_files - dvc_files == set(), "dvclive files no DVC stage declares"
    assert dvc_files - catalog_files - run_dirs - live_files == set(), "DVC outputs that are not catalog files"


def test_each_pipeline_has_a_stage_and_stages_follow_the_data_flow(project):
    registered, _, _, stages = project
    assert set(stages) == set(registered) - {"__default__", *STUDIES}
    produced_before = set()
    for name, stage in stages.items():
        data_deps = [dep for dep in stage.get("deps", []) if dep.startswith("data/")]
        assert set(data_deps) <= produced_before, f"stage {name} reads {set(data_deps) - produced_before} before it is made"
        assert stage["cmd"].startswith(f"kedro run --pipelines={name} ")
        produced_before |= set(_dvc_paths(stage, "outs", "metrics", "plots"))
