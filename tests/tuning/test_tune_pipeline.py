"""`kedro run --pipelines=tune` end to end on a tiny study: pruning, the overlay, adding trials, a killed worker."""

import signal
import time

import optuna
import pandas as pd
import pytest
import sqlalchemy.exc
import yaml
from kedro.config import OmegaConfigLoader
from optuna.trial import TrialState

from fdsml.config import ConfigError
from fdsml.settings import CONFIG_LOADER_ARGS
from fdsml.tuning.storage import open_storage, storage_location
from tests.tuning.project import kedro_tune, tune_project

UNTUNED = {"optimizer": {"base_lr": 0.0003}}  # too small to learn much in 4 steps
PRUNED_TRIAL = {  # the untuned rate first (the baseline), then the seeded grid's 0.5 (the best) and 0.0001 (pruned)
    "space": [{"key": "pretrain.optimizer.base_lr", "choices": [0.0003, 0.0001, 0.0002, 0.5]}],
    "sampler": {"name": "grid"},
    "finish_pruned": 1,
}


def _study(project, name="tiny"):
    """The study as a worker opens it (a reader racing the worker to create the schema waits for it)."""
    location = storage_location(None, f"{project}/data/07_model_output/tune", name)
    return optuna.load_study(study_name=name, storage=open_storage(location))


def _run(project, *extra):
    result = kedro_tune(project, *extra)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _live_values(project, trial, column="val_probe_recall_at_1"):
    """The validation's values the trial's dvclive files recorded, by step."""
    table = pd.read_csv(project / f"data/08_reporting/live/tune/tiny/trial_{trial}/pretrain/plots/metrics/{column}.tsv", sep="\t")
    return dict(zip(table["step"], table[column]))


@pytest.mark.slow  # a whole tune pipeline run twice in kedro: about 50 seconds (`make test` stays under 15 minutes; CI runs it)
def test_a_tiny_study_prunes_on_the_validation_writes_its_best_overlay_and_a_second_run_adds_trials(tmp_path):
    project = tune_project(tmp_path / "project", tune=PRUNED_TRIAL, pretrain=UNTUNED)
    _run(project)
    trials = _study(project).get_trials()
    assert [t.number for t in trials] == [0, 1, 2]
    assert trials[0].params == {"pretrain.optimizer.base_lr": 0.0003} and trials[0].user_attrs["baseline"]  # the untuned run first
    states = [t.state for t in trials]
    assert TrialState.PRUNED in states and TrialState.COMPLETE in states, states
    for trial in trials:
        live = _live_values(project, trial.number)
        shared = sorted(set(live) & set(trial.intermediate_values))
        assert len(shared) >= 2 and all(abs(live[s] - trial.intermediate_values[s]) < 1e-6 for s in shared)
        assert trial.user_attrs["run_dir"] == f"data/06_models/tune/tiny/trial_{trial.number}"
    pruned = next(t for t in trials if t.state == TrialState.PRUNED)
    assert max(pruned.intermediate_values) < 4 and "steps" not in pruned.user_attrs  # stopped before its last step
    top = max((t for t in trials if t.state == TrialState.PRUNED), key=lambda t: (t.value, -t.number))
    finished = _study(project).user_attrs[f"finished_pruned_trial_{top.number}"]  # run to its end afterwards
    assert finished == _live_values(project, top.number)[4] and len(_study(project).user_attrs) == 2  # metric + one
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    for trial in complete:
        assert list((project / trial.user_attrs["run_dir"] / "pretrain").glob("*/last.pt"))
        assert trial.user_attrs["steps"] == 4 and trial.value == trial.intermediate_values[4] == _live_values(project, trial.number)[4]
    best = max(complete, key=lambda t: t.value)

    overlay = yaml.safe_load((project / "data/08_reporting/tune_best_params.yml").read_text())
    assert overlay == {"pretrain": {"optimizer": {"base_lr": best.params["pretrain.optimizer.base_lr"]}}}
    table = pd.read_csv(project / "data/08_reporting/tune_trials.csv")
    assert table["state"].tolist() == [t.state.name for t in trials]
    study_md = (project / "data/08_reporting/tune_study.md").read_text()
    assert f"Best: trial {best.number}" in study_md
    unrun = sum(4 - max(t.intermediate_values) for t in trials if t.state == TrialState.PRUNED)
    assert f"Pruning stopped {len(trials) - len(complete)} trials: {unrun} of 12 planned pre-training steps" in study_md
    for picture in ("history", "importances", "slices"):
        assert (project / f"data/08_reporting/tune_{picture}.png").stat().st_size > 5000

    (project / "conf/tuned").mkdir()
    (project / "conf/tuned/parameters_best.yml").write_text(yaml.safe_dump(overlay))  # copied into conf/<env>/
    params = OmegaConfigLoader(str(project / "conf"), **CONFIG_LOADER_ARGS | {"default_run_env": "tuned"})["parameters"]
    assert params["pretrain"]["optimizer"]["base_lr"] == best.params["pretrain.optimizer.base_lr"] != 0.5  # conf/base's
    assert params["pretrain"]["optimizer"]["momentum"] == 0.9 and params["pretrain"]["objective"] == "pa_triplet"  # the rest kept

    _run(project, "--params=tune.budget.n_trials=4")
    again = _study(project).get_trials()
    assert len(again) == 4 and [(t.number, t.state, t.value) for t in again[:3]] == [(t.number, t.state, t.value) for t in trials]


def _validated_once(project) -> bool:
    """Whether the study's first trial is running and has reported a validation value."""
    if not (project / "data/07_model_output/tune/tiny.db").exists():
        return False
    try:
        running = _study(project).get_trials(states=(TrialState.RUNNING,))
    except (KeyError, ConfigError, sqlalchemy.exc.OperationalError):  # the study is not created yet
        return False
    return bool(running and running[0].intermediate_values)


@pytest.mark.slow  # a study killed mid-trial and resumed: about 30 seconds (`make test` stays under 15 minutes; CI runs it)
def test_a_worker_killed_mid_trial_leaves_a_failed_trial_that_the_resumed_study_never_counts(tmp_path):
    project = tune_project(
        tmp_path / "project",
        tune={"budget": {"n_trials": 2}, "pruner": {"name": "none"}},
        pretrain={"train": {"max_steps": 3000, "checkpoint_every": 5}, "validation": {"every": 5}},
    )  # trial 0 far longer than the wait for its first validation: it is killed mid-trial, never after it ended
    worker = kedro_tune(project, wait=False)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _validated_once(project):  # mid-trial
        time.sleep(0.3)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    (killed,) = _study(project).get_trials()
    assert killed.state == TrialState.RUNNING and killed.number == 0

    _run(project, "--params=pretrain.train.max_steps=3")
    trials = _study(project).get_trials()
    assert [(t.number, t.state) for t in trials] == [(0, TrialState.FAIL), (1, TrialState.COMPLETE), (2, TrialState.COMPLETE)]
    table = pd.read_csv(project / "data/08_reporting/tune_trials.csv")
    assert table["state"].tolist() == ["FAIL", "COMPLETE", "COMPLETE"]
    assert "Best: trial 0" not in (project / "data/08_reporting/tune_study.md").read_text()
