"""A study file's journal (``storage``): the units travel with the repository, and only the study's own units go in it."""

from __future__ import annotations

import shutil

import pytest
import yaml

from fdsml.config import ConfigError, env_parameters
from fdsml.tuning.study_file import Scale, changes_units, read_study
from fdsml.tuning.study_runner import StudySettings, parse_study_settings, run_study, study_report
from fdsml.tuning.study_steps import STEPS, Step
from tests.tuning.study_files import CALLS, COUNTED, counted, study_project

JOURNALED = {**COUNTED, "storage": "results/studies/counted.jsonl", "scales": {"short": {"overlay": {"pretrain.train.max_steps": 1}}, "low": {"arms": ["low"]}}}


@pytest.fixture
def count_step(monkeypatch):
    monkeypatch.setitem(STEPS, "count", Step(counted, ("pretrain",), ("count.value",)))
    CALLS.clear()


def run_counted(project, machine, **settings):
    """The study in ``project`` as a clone on ``machine`` (a folder of its own for the default storage and runs) runs it."""
    settings = parse_study_settings({"name": "counted", "conf_source": str(project / "conf"), "storage_dir": str(machine), "run_dir": str(machine / "runs"), **settings})
    return run_study(read_study(project / "conf/studies/counted.yml"), settings, env_parameters(str(project / "conf"), "base"))


def run(project, machine, **settings) -> list[dict]:
    results, failed, missing = run_counted(project, machine, **settings)
    assert failed == [] and missing == []
    return results


def test_a_clone_of_the_project_with_its_journal_reuses_every_unit_on_another_machine(tmp_path, count_step):
    project = study_project(tmp_path / "project", JOURNALED, "counted")
    first = run(project, tmp_path / "machine_a")
    assert len(CALLS) == 4 and (project / "results/studies/counted.jsonl").is_file()
    assert not (tmp_path / "machine_a" / "counted.db").exists()  # the units are in the journal, not the machine's SQLite file
    clone = tmp_path / "clone"
    shutil.copytree(project, clone)
    CALLS.clear()
    again = run(clone, tmp_path / "machine_b")
    assert CALLS == []  # every unit reused from the committed journal
    assert sorted(r["metrics"]["count.value"] for r in again) == sorted(r["metrics"]["count.value"] for r in first) == [1.0, 2.0, 2.0, 3.0]


def test_a_scale_that_changes_the_units_keeps_them_out_of_the_journal_and_one_that_picks_arms_reuses_it(tmp_path, count_step):
    project = study_project(tmp_path / "project", JOURNALED, "counted")
    run(project, tmp_path / "machine", scale="short")
    assert not (project / "results/studies/counted.jsonl").exists() and (tmp_path / "machine" / "counted.db").is_file()
    run(project, tmp_path / "machine")
    journal = (project / "results/studies/counted.jsonl").read_bytes()
    CALLS.clear()
    run(project, tmp_path / "other", scale="low")
    assert CALLS == []  # the scale's units are the study's own: found in the journal
    assert (project / "results/studies/counted.jsonl").read_bytes() == journal


def test_draw_only_runs_no_unit_and_its_page_names_the_units_the_journal_lacks(tmp_path, count_step):
    project = study_project(tmp_path / "project", JOURNALED, "counted")
    run(project, tmp_path / "machine_a", scale="low")  # the journal holds arm low's two units, not high's
    CALLS.clear()
    results, failed, missing = run_counted(project, tmp_path / "machine_b", draw_only=True)
    assert CALLS == [] and failed == []
    assert sorted(r["metrics"]["count.value"] for r in results) == [1.0, 2.0]
    assert missing == ["high|pretrain.train.seed=0", "high|pretrain.train.seed=1"]
    page, found = study_report(read_study(project / "conf/studies/counted.yml"), StudySettings(name="counted"), results, missing)
    assert "**Partial: 2 of 4 units complete.** Not yet run (units by arm): `high` 2." in page
    assert found["missing"] == missing
    complete, _ = study_report(read_study(project / "conf/studies/counted.yml"), StudySettings(name="counted"), results)
    assert "Partial" not in complete


def test_the_command_lines_storage_comes_before_the_study_files(tmp_path, count_step):
    project = study_project(tmp_path / "project", JOURNALED, "counted")
    run(project, tmp_path / "machine", storage=str(tmp_path / "team.jsonl"))
    assert (tmp_path / "team.jsonl").is_file() and not (project / "results/studies/counted.jsonl").exists()


@pytest.mark.parametrize("storage", ["postgresql://fdsml@db.example/studies", "/srv/studies/counted.jsonl", "../counted.jsonl", "results/counted.db"])
def test_a_study_files_storage_must_be_a_journal_inside_the_project(tmp_path, storage):
    project = study_project(tmp_path / "project", {**COUNTED, "storage": storage}, "counted")
    with pytest.raises(ConfigError, match=r"counted\.yml: storage: .* must be a journal file inside the project, ending \.log or \.jsonl"):
        read_study(project / "conf/studies/counted.yml")


def test_a_scale_changes_the_units_by_an_overlay_or_a_named_steps_not_by_picking_arms_or_seeds():
    assert changes_units(Scale(overlay={"pretrain.train.max_steps": 2}))
    assert changes_units(Scale(named_steps={"converged": {"retrieval.train.max_steps": 3}}))
    assert not changes_units(Scale(arms=("fdsl",), seeds={"pretrain.train.seed": (1,)}))
