"""DVC over the whole chain, in a scratch copy of the repository with a tiny configuration.

`dvc repro` runs every stage once, then nothing; a parameter change reruns exactly the stages
downstream of it; every stage runs in the Kedro environment of `params.yaml` (recorded in
dvc.lock) and depends on its keys in conf/base AND conf/paper; `dvc exp run -S` sweeps a
parameter; and a local remote carries every output to a fresh clone.
"""

import json
import re
from pathlib import Path

import pytest
import yaml
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from tests.dvc_chain import copy_of_chain, output_paths, run_checked, stages_ran
from tests.support import ROOT

pytestmark = pytest.mark.slow


def _changed(copy: Path) -> set[str]:
    """The stages `dvc status` finds out of date (what `dvc repro` would start from)."""
    return set(json.loads(run_checked(["dvc", "status", "--json"], copy)))


def _lookup(mapping: dict, dotted: str):
    for key in dotted.split("."):
        mapping = mapping[key]
    return mapping


@pytest.fixture(scope="module")
def repository(built_tiny_chain, tmp_path_factory):
    built, first = built_tiny_chain
    copy = tmp_path_factory.mktemp("repo")
    copy_of_chain(built, copy)
    return copy, first


def test_repro_runs_every_stage_once_then_nothing(repository):
    copy, first = repository
    stages = set(yaml.safe_load((copy / "dvc.yaml").read_text())["stages"])
    assert stages_ran(first) == stages
    assert all(path.exists() for path in output_paths(copy))
    assert stages_ran(run_checked(["dvc", "repro"], copy)) == set()
    assert "up to date" in run_checked(["dvc", "status"], copy)


def test_every_stage_runs_kedro_in_the_tracked_environment_on_both_parameter_sets():
    """`--pipelines` (not the deprecated `--pipeline`), `--env ${kedro_env}`, and for each parameter
    section the stage's pipeline reads, the same keys in conf/base and in conf/paper (each present
    there: DVC refuses a listed key a file lacks)."""
    bootstrap_project(ROOT)
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        assert re.fullmatch(rf"kedro run --pipelines={name}( --from-nodes=\S+)? --env \$\{{kedro_env\}}", stage["cmd"]), stage["cmd"]
        entries = stage.get("params", [])
        assert "kedro_env" in entries, f"stage {name}: params lacks kedro_env, so dvc.lock would not record the environment"
        files = {file: keys for entry in entries if isinstance(entry, dict) for file, keys in entry.items()}
        for file, keys in files.items():
            env, base_name = file.split("/")[1:]
            other = f"conf/{'paper' if env == 'base' else 'base'}/{base_name}"
            assert files.get(other) == keys, f"stage {name}: {file} lists {keys}, {other} lists {files.get(other)}"
            values = yaml.safe_load((ROOT / file).read_text())
            for key in keys:
                _lookup(values, key)  # KeyError names a key the file lacks
        read = {i.split(":", 1)[1].split(".")[0] for node in pipelines[name].nodes for i in node.inputs if i.startswith("params:")}
        assert {key.split(".")[0] for keys in files.values() for key in keys} == read, f"stage {name} reads {read}"


def test_dvc_lock_records_the_default_environment(repository):
    copy, _ = repository
    assert yaml.safe_load((copy / "params.yaml").read_text())["kedro_env"] == "local"
    for name, stage in yaml.safe_load((copy / "dvc.lock").read_text())["stages"].items():
        assert stage["cmd"].endswith("--env local"), name
        assert stage["params"]["params.yaml"] == {"kedro_env": "local"}, name


@pytest.mark.parametrize(
    ("file", "key", "readers"),
    [
        # the whole fractals block selects the family and its settings: every stage that renders reads it
        ("parameters_fractals.yml", "fractals.n_classes", {"fractals", "validate_descriptor", "pretrain", "analysis"}),
        ("parameters_fractals.yml", "fractals.render.points", {"fractals", "validate_descriptor", "pretrain", "analysis"}),
        ("parameters_fractals.yml", "fractals.perturbation.factor_range", {"fractals", "validate_descriptor", "pretrain", "analysis"}),
        ("parameters_validate_descriptor.yml", "validate_descriptor.n_triplets", {"validate_descriptor"}),
        ("parameters_pretrain.yml", "pretrain.model.embedding_dim", {"pretrain"}),
        ("parameters_retrieval.yml", "retrieval.seeds", {"retrieval"}),
        ("parameters_classification.yml", "classification.image_size", {"classification", "robustness"}),
        ("parameters_robustness.yml", "robustness.seed", {"robustness"}),
        ("parameters_analysis.yml", "analysis.trajectory.n_alphas", {"analysis"}),
    ],
)
def test_a_paper_key_change_reruns_exactly_the_stages_that_read_it(repository, file, key, readers):
    copy, _ = repository
    path = copy / "conf/paper" / file
    text = path.read_text()
    values = yaml.safe_load(text)
    *parents, leaf = key.split(".")
    section = _lookup(values, ".".join(parents))
    section[leaf] = {"changed": section[leaf]}
    path.write_text(yaml.safe_dump(values))
    try:
        assert _changed(copy) == readers
    finally:
        path.write_text(text)


def test_the_published_scale_is_one_variable_away(repository):
    """`kedro_env: paper` puts every stage out of date and runs each with `--env paper`."""
    copy, _ = repository
    path = copy / "params.yaml"
    text = path.read_text()
    path.write_text(text.replace("kedro_env: local", "kedro_env: paper"))
    try:
        stages = set(yaml.safe_load((copy / "dvc.yaml").read_text())["stages"])
        assert _changed(copy) == stages
        commands = re.findall(r"^> (.*)$", run_checked(["dvc", "repro", "--dry"], copy), re.MULTILINE)
        assert len(commands) == len(stages) and all(command.endswith("--env paper") for command in commands)
    finally:
        path.write_text(text)


def test_a_parameter_change_reruns_exactly_the_stages_downstream(repository):
    copy, _ = repository
    params = copy / "conf/base/parameters_retrieval.yml"
    params.write_text(params.read_text().replace("seeds: [0]", "seeds: [1]"))
    assert stages_ran(run_checked(["dvc", "repro"], copy)) == {"retrieval", "report", "export"}  # the model card shows retrieval
    params = copy / "conf/base/parameters_robustness.yml"
    params.write_text(params.read_text().replace("example_index: 0", "example_index: 1"))
    assert stages_ran(run_checked(["dvc", "repro"], copy)) == {"robustness", "report"}
    run_checked(["git", "add", "-A"], copy)
    run_checked(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "changed parameters"], copy)


def test_an_experiment_sweeps_a_parameter(repository):
    copy, _ = repository
    output = run_checked(["dvc", "exp", "run", "-S", "conf/base/parameters_retrieval.yml:retrieval.seeds=[2]"], copy)
    assert stages_ran(output) == {"retrieval", "report", "export"}
    table = run_checked(["dvc", "exp", "show", "--csv"], copy)
    assert "retrieval.seeds" in table and "[2]" in table


def test_a_fresh_clone_pulls_every_output_from_the_remote(repository, tmp_path):
    copy, _ = repository
    run_checked(["dvc", "remote", "add", "-f", "-d", "shared", str(tmp_path / "remote")], copy)
    run_checked(["dvc", "push"], copy)
    run_checked(["git", "add", "-A"], copy)
    run_checked(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "remote"], copy)
    clone = tmp_path / "clone"
    run_checked(["git", "clone", "-q", str(copy), str(clone)], tmp_path)
    run_checked(["dvc", "pull"], clone)
    assert all(path.exists() for path in output_paths(clone))
    assert "up to date" in run_checked(["dvc", "status"], clone)


def test_experiments_over_the_pretraining_filter_report_their_own_retrieval_numbers(repository):
    """Each experiment fine-tunes from its own pre-trained model: a finished fine-tuning of another
    model in the persistent run folders is not reused (it was, when runs were keyed by start name)."""
    copy, _ = repository
    metrics = {}
    for name in ("all", "diff"):
        setting = f"conf/base/parameters_pretrain.yml:pretrain.pa_triplet.filter={name}"
        output = run_checked(["dvc", "exp", "run", "retrieval", "-n", f"filter-{name}", "-S", setting], copy)
        assert {"pretrain", "retrieval"} <= stages_ran(output)
        metrics[name] = json.loads((copy / "data/08_reporting/retrieval_metrics.json").read_text())
    pretrained = [start for start in metrics["all"] if start != "scratch"]
    assert pretrained, "the default retrieval configuration fine-tunes a pre-trained start"
    for start in pretrained:
        assert metrics["all"][start] != metrics["diff"][start], f"{start}: the same numbers for two pre-trained models"
