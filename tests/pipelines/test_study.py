"""``kedro run --pipelines=study``: a tiny study file run end to end, its page and results catalog entries, a second run reusing every unit."""

import json
import os
import posixpath
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kedro.config import OmegaConfigLoader

from fdsml.config import CONFIG_LOADER_ARGS, parse
from fdsml.tuning.study_file import StudyDefinition
from fdsml.tuning.study_runner import StudySettings, study_report
from tests.support import ROOT
from tests.tuning.study_files import TINY_STUDY, study_project

FIGURE = {"x": "pretrain.train.max_steps", "metrics": ["finetuned.recall@1", "frozen.recall@1"]}


def kedro_study(project: Path, *params: str) -> subprocess.CompletedProcess:
    env = os.environ | {
        "KEDRO_DISABLE_TELEMETRY": "1",
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
    }
    command = ["kedro", "run", "--pipelines=study", "--params=" + ",".join(("study.name=tiny", *params))]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_a_study_file_runs_end_to_end_and_a_second_run_reuses_every_unit(tmp_path):
    study = {
        **TINY_STUDY,
        "arms": {**TINY_STUDY["arms"], "fdsl": {"pretrain.objective": "fdsl", "pretrain.train.max_steps": 2}},
        "table": {**TINY_STUDY["table"], "every_combination": ["finetuned.recall@1"]},
        "figure": FIGURE,
    }
    project = study_project(tmp_path / "project", study)
    first = kedro_study(project)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    page = (project / "data/08_reporting/studies/tiny.md").read_text()
    results = json.loads((project / "data/08_reporting/studies/tiny.json").read_text())
    assert page.startswith("# Tiny study\n") and "| scratch | 4 | 2 |" in page and "| fdsl | 4 | 2 |" in page
    assert "finetuned.recall@1 std, every seed combination |" in page and "(tiny.png)" in page
    assert (project / "data/08_reporting/studies/tiny.png").read_bytes()[:4] == b"\x89PNG"
    assert len(results["units"]) == 8 and {unit["arm"] for unit in results["units"]} == {"scratch", "fdsl"}
    pretrained = [path for path in (project / "data/06_models/studies/pretrain").iterdir() if path.is_dir()]  # every study's, beside their locks
    assert len(pretrained) == 2  # fdsl's two pre-training seeds; its fine-tuning seeds found them finished
    second = kedro_study(project)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "finetuned.recall@1" not in second.stdout + second.stderr  # no unit ran again
    assert (project / "data/08_reporting/studies/tiny.md").read_text() == page
    del study["figure"]  # not part of any unit's definition: every unit is reused, the page drops the picture
    (project / "conf/studies/tiny.yml").write_text(yaml.safe_dump(study, sort_keys=False))
    without = kedro_study(project)
    assert without.returncode == 0, without.stderr[-3000:]
    assert "tiny.png" not in (project / "data/08_reporting/studies/tiny.md").read_text()
    assert not (project / "data/08_reporting/studies/tiny.png").exists()  # the earlier run's picture went with it


def test_the_page_links_its_figure_where_the_catalog_writes_it():
    catalog = OmegaConfigLoader(str(ROOT / "conf"), **CONFIG_LOADER_ARGS | {"runtime_params": {"study": {"name": "tiny"}}})["catalog"]
    study = parse(StudyDefinition, {**TINY_STUDY, "figure": FIGURE}, "study")
    result = {"arm": "scratch", "seeds": {"pretrain.train.seed": 0}, "metrics": {"finetuned.recall@1": 0.5, "frozen.recall@1": 0.25}, "commit": "c"}
    page, _ = study_report(study, StudySettings(name="tiny"), [result])
    (link,) = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page)
    page_dir = posixpath.dirname(catalog["study_page"]["filepath"])
    assert posixpath.normpath(posixpath.join(page_dir, link)) == catalog["study_figure"]["filepath"] == "data/08_reporting/studies/tiny.png"


@pytest.mark.slow  # a kedro study run in a child process
def test_an_unknown_arm_key_stops_the_run_before_any_unit(tmp_path):
    project = study_project(tmp_path / "project")
    path = project / "conf/studies/tiny.yml"
    path.write_text(path.read_text().replace("pretrain.objective: fdsl", "pretrain.objectiv: fdsl"))
    done = kedro_study(project)
    assert done.returncode != 0
    output = " ".join((done.stdout + done.stderr).split())
    assert "tiny.yml: arms.fdsl:" in output and "did you mean pretrain.objective" in output
    assert not (project / "data/07_model_output/studies").exists()
