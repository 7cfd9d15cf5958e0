"""dvc.yaml lists, stage by stage, the code the stage runs (``python -m fdsml.stage_code --write`` writes it): the plug-ins
conf/base and conf/paper select and not their siblings, so adding a plug-in no stage selects leaves ``dvc status`` clean
and an edit of a plug-in a stage runs makes exactly that stage stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fdsml import stage_code
from tests.fresh_clone import ENV, fresh_clone
from tests.plugin_examples import KINDS, drop_into
from tests.project.dvc_lock import stage_outputs, stale_stages
from tests.support import ROOT


@pytest.fixture(scope="module")
def expected():
    return stage_code.expected_files(ROOT)


def test_dvc_yaml_lists_the_code_each_stage_runs(expected):
    listed = stage_code.listed_files((ROOT / "dvc.yaml").read_text())
    wrong = [stage for stage in expected if expected[stage] != sorted(listed[stage])]
    assert not wrong, "\n".join(stage_code.differences(ROOT)) + "\nRewrite them: python -m fdsml.stage_code --write"


def test_a_stage_runs_the_plugins_conf_base_and_conf_paper_select_and_none_other(expected):
    objectives, families, readers = "src/fdsml/training/pretrain_objectives/", "src/fdsml/families/", "src/fdsml/data/readers/"
    assert [path for path in expected["pretrain"] if path.startswith(objectives)] == [
        f"{objectives}{name}.py" for name in ("__init__", "pa_triplet", "recipe", "triplet_settings")
    ]
    for stage in ("fractals", "validate_descriptor", "pretrain", "analysis"):
        assert f"{families}finefractaldb.py" in expected[stage] and f"{families}rcdb.py" not in expected[stage], stage
    # retrieval: omniglot (conf/base), cub (conf/paper); the probe of pre-training: omniglot_validation, cub
    assert {path for path in expected["retrieval"] if path.startswith(readers)} == {f"{readers}{name}.py" for name in ("__init__", "cub", "omniglot")}
    assert {path for path in expected["pretrain"] if path.startswith(readers)} == {f"{readers}{name}.py" for name in ("__init__", "cub", "omniglot")}
    assert {path for path in expected["classification"] if path.startswith(readers)} == {
        f"{readers}{name}.py" for name in ("__init__", "cifar", "digits", "flowers102", "image_folder", "stanford_cars")
    }
    assert not any(path.startswith(("src/fdsml/training/", "src/fdsml/families/")) for path in expected["report"])


def test_the_src_entries_are_rewritten_and_nothing_else():
    text = (
        "stages:\n  a:\n    cmd: run a\n    deps:\n      - src/old.py   # a comment\n      - conf/a.yml\n"
        "      - src/gone.py\n    outs:\n      - src/out.txt\n  b:\n    deps:\n      - data/x\n"
    )
    assert stage_code.rewritten(text, {"a": ["src/one.py", "src/two.py"], "b": ["src/b.py"]}) == (
        "stages:\n  a:\n    cmd: run a\n    deps:\n      - src/one.py\n      - src/two.py\n      - conf/a.yml\n"
        "    outs:\n      - src/out.txt\n  b:\n    deps:\n      - src/b.py\n      - data/x\n"
    )


def _commit_the_lock(folder: Path) -> None:
    """A dvc.lock of the copy's code and configuration, without running a stage: placeholder outputs, `dvc commit`."""
    for output in stage_outputs(folder):
        path = folder / output
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix:
            path.write_text("{}")
        else:
            path.mkdir(exist_ok=True)
            (path / "placeholder").write_text("")
    subprocess.run(["dvc", "commit", "--force", "--quiet"], cwd=folder, env=ENV, check=True, capture_output=True)


EDITED = {  # a plug-in conf/base or conf/paper selects, and the stages that run it
    "src/fdsml/training/pretrain_objectives/pa_triplet.py": {"pretrain"},
    "src/fdsml/families/finefractaldb.py": {"fractals", "validate_descriptor", "pretrain", "analysis"},
    "src/fdsml/data/readers/omniglot.py": {"pretrain", "retrieval"},
    "src/fdsml/data/readers/digits.py": {"classification", "robustness", "analysis"},
}


@pytest.mark.slow  # a copy of the project and five `dvc status`: about a minute on 2 busy cores
def test_an_unselected_plugin_keeps_dvc_status_clean_and_an_edit_of_a_used_one_makes_its_stages_stale(tmp_path):
    copy = fresh_clone(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    _commit_the_lock(copy)
    assert stale_stages(copy) == {}
    drop_into(copy, *KINDS)
    env = ENV | {"PYTHONPATH": str(copy / "src"), "OMP_NUM_THREADS": "1"}
    listed = subprocess.run([sys.executable, "-m", "fdsml.stage_code"], cwd=copy, env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stdout + listed.stderr  # no stage runs the added plug-ins
    assert stale_stages(copy) == {}
    for path, stages in EDITED.items():
        source = (copy / path).read_text()
        (copy / path).write_text(source + "\nEDITED = True\n")
        assert stale_stages(copy) == {stage: [f"{path} (modified)"] for stage in stages}, path
        (copy / path).write_text(source)

