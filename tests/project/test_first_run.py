"""A new user's first commands in a fresh clone: the README's pipeline commands and ``make run``.

Each ``kedro run --pipeline=NAME`` of the README either runs or stops at once with one line
naming the command to run first; ``make run`` prints no deprecation warning, ends by saying
what it wrote, reused and what to try next, and a second ``make run`` says nothing needed doing.
"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.fresh_clone import BIN, ROOT, finish, fresh_clone, run, start

pytestmark = pytest.mark.slow

README = (ROOT / "README.md").read_text()
README_COMMANDS = re.findall(r"`(kedro run --pipeline=([a-z_]+)[^`]*)`", README) + re.findall(
    r"^(kedro run --pipeline=([a-z_]+)[^#\n]*?)\s*(?:#.*)?$", README, flags=re.MULTILINE
)
NAMES_THE_COMMAND = re.compile(r"run `kedro run --pipelines=([\w,]+)( --env \w+)?` first$")
TINY = (
    "fractals.n_classes=4,fractals.instances_per_class=3,fractals.render.size=32,fractals.render.points=800,"
    "fractals.class_filter.size=128,fractals.class_filter.points=8000,"
    "pretrain.data.classes_per_batch=4,pretrain.data.instances_per_class=3,pretrain.model.embedding_dim=8,"
    "pretrain.train.max_steps=1,pretrain.train.device=cpu,fractals.holdout.instance_fraction=0,"
    "fractals.holdout.class_fraction=0,pretrain.validation.every=0"
)


def _readable(output: str) -> str:
    """The console's words without the line breaks and margins a narrow terminal adds."""
    return " ".join(output.split())


def _optional_inputs() -> set[str]:
    """Catalog entries that load as None when absent (the previous run's outputs)."""
    entries = {}
    for path in (ROOT / "conf/base").glob("catalog*.yml"):
        entries |= yaml.safe_load(path.read_text())
    return {name for name, entry in entries.items() if entry["type"] == "fdsml.catalog_datasets.OptionalDataset"}


def _stops_or_runs(command: str, code: int, output: str) -> None:
    if code == 0:
        return
    hints = [line for line in output.splitlines() if "kedro run --pipelines=" in line]
    assert len(hints) == 1 and NAMES_THE_COMMAND.search(hints[0]), f"{command}:\n{output}"
    assert "Traceback" not in output and "DatasetError" not in output, f"{command}:\n{output}"
    from kedro.framework.project import pipelines

    named = NAMES_THE_COMMAND.search(hints[0]).group(1).split(",")
    requested = re.search(r"--pipeline=(\w+)", command).group(1)
    together = sum((pipelines[name] for name in [*named, requested]), start=pipelines[requested])
    needs = {name for name in together.inputs() if not name.startswith("params:")}
    assert needs <= _optional_inputs(), f"{command}: the named command does not write {needs - _optional_inputs()}"
    if "--env" in command:
        assert f"--env {command.split('--env ')[1].split()[0]}" in hints[0]


def test_every_readme_pipeline_command_runs_or_names_the_command_to_run_first(tmp_path):
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(ROOT)
    clone = fresh_clone(tmp_path / "project")
    assert {name for _, name in README_COMMANDS} >= {"fractals", "validate_descriptor", "report"}
    # pretrain runs in the make-run test below; fractals runs last so the others see a fresh clone. Each command has a
    # clone of its own: started side by side in one project, all but one would be refused by its run lock
    others = [command for command, name in README_COMMANDS if name not in ("pretrain", "fractals")]
    waiting = [(command, start(command, fresh_clone(tmp_path / f"alone{index}"))) for index, command in enumerate(others)]
    for command, process in waiting:
        _stops_or_runs(command, *finish(process))
    code, output = run("kedro run --pipeline=fractals", clone)
    assert code == 0, output
    assert (clone / "data/02_intermediate/fractal_codes.parquet").is_file()


@pytest.fixture(scope="module")
def make_run(tmp_path_factory):
    """The command ``make run`` runs, taken from the Makefile, twice in a fresh clone (tiny parameters)."""
    clone = fresh_clone(tmp_path_factory.mktemp("make_run"))
    code, plan = run("make -n run", clone)
    assert code == 0, plan
    line = next(line for line in plan.splitlines() if "kedro run" in line)
    command = line.replace(".venv/bin/", f"{BIN}/") + f" --params={TINY}"
    return line, run(command, clone), run(command, clone)


def test_make_run_prints_no_deprecation_warning(make_run):
    line, (code, output), _ = make_run
    assert "--pipelines=pretrain" in line and "--pipeline=" not in line
    assert code == 0, output
    for warning in ("deprecat", "futurewarning"):
        assert warning not in output.lower(), output


def test_make_run_says_what_it_made_what_it_reused_and_what_next(make_run):
    _, (code, first), (again, second) = make_run
    assert code == 0 and again == 0, second
    first, second = _readable(first), _readable(second)
    for path in ("data/06_models/pretrained_model.pt", "data/08_reporting/pretrain_history.csv", "data/02_intermediate/fractal_codes.parquet"):
        assert path in first and path in second
    assert "make viz" in first and "dvc repro" in first and "data/08_reporting/report.md" in first
    assert "Nothing needed doing" not in first and "Reused" not in first
    assert "Reused the FineFractalDB table data/02_intermediate/fractal_codes.parquet" in second
    run_folder = r"data/06_models/pretrain_run/[0-9a-f]{16}"  # the run's own folder, named by its fingerprint
    assert re.search(rf"Reused the training run {run_folder} \(finished at step 1\)", second), second
    assert re.search(rf"Nothing needed doing. To redo it, delete what was reused: rm -r data/02_intermediate/fractal_codes.parquet {run_folder}", second), second
