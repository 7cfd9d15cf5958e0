"""Workers started independently, each in its own project folder (standing for its own machine), on one study."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import optuna
import pandas as pd
import yaml
from optuna.trial import TrialState

from fdsml.tuning.outputs import best_trial
from tests.tuning.project import kedro_tune, tune_project

PARAMETER = "pretrain.optimizer.base_lr"
WORKERS_TIMEOUT_S = 900


def worker_pid(trial: optuna.trial.FrozenTrial) -> int:
    return int(trial.user_attrs["worker"].rpartition(":")[2])


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``condition`` (every 0.3 s) until it holds; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.3)


def start_workers(folder: Path, names: tuple[str, ...], tune: dict, pretrain: dict) -> dict[int, tuple[Path, object]]:
    """``kedro run --pipelines=tune`` started in a project folder of each name: {pid: (project, process)}."""
    projects = [tune_project(folder / name, tune=tune, pretrain=pretrain) for name in names]
    return {process.pid: (project, process) for project in projects for process in [kedro_tune(project, wait=False)]}


def two_workers_share_one_study(folder: Path, storage: str, read: Callable[[], optuna.Study], n_trials: int) -> list:
    """Two workers on ``storage`` run its study to ``n_trials``: no trial lost or run twice, each run in its own
    worker's project with the value that run wrote, and the same best trial seen from both. The trials."""
    tune = {"storage": storage, "budget": {"n_trials": n_trials}, "pruner": {"name": "none"}, "sampler": {"seed": None}, "baseline": False}
    workers = start_workers(folder, ("a", "b"), tune, {"train": {"max_steps": 2}})
    projects = [project for project, _ in workers.values()]

    def all_ended() -> bool:
        return all(process.poll() is not None for _, process in workers.values())

    wait_for(all_ended, WORKERS_TIMEOUT_S, "both workers ended")
    for project, process in workers.values():
        assert process.returncode == 0, (project / "tune.log").read_text()[-3000:]

    trials = read().get_trials()
    assert [t.number for t in trials] == list(range(len(trials))) and n_trials <= len(trials) <= n_trials + 1
    assert {t.state for t in trials} == {TrialState.COMPLETE}
    assert len({t.params[PARAMETER] for t in trials}) == len(trials), "each worker draws its own"
    assert {worker_pid(t) for t in trials} == set(workers), "both workers ran trials"
    for trial in trials:  # each trial ran once, in its worker's project, and its value is that run's
        own = workers[worker_pid(trial)][0]
        (other,) = [project for project in projects if project != own]
        assert list((own / trial.user_attrs["run_dir"]).glob("pretrain/*/last.pt")) and not (other / trial.user_attrs["run_dir"]).exists()
        live = pd.read_csv(own / f"data/08_reporting/live/tune/tiny/trial_{trial.number}/pretrain/plots/metrics/val_probe_recall_at_1.tsv", sep="\t")
        assert trial.value == live.loc[live["step"] == 2, "val_probe_recall_at_1"].item()

    # Either may have ended while the other's last trial ran (two ends within one poll give no order): each reads
    # the finished study again, adds no trial, and writes the best trial as the study now holds it.
    for project in projects:
        again = kedro_tune(project)
        assert again.returncode == 0 and len(read().get_trials()) == len(trials), "a finished study adds no trial"
    best = best_trial(read())
    for project in projects:
        overlay = yaml.safe_load((project / "data/08_reporting/tune_best_params.yml").read_text())
        assert overlay == {"pretrain": {"optimizer": {"base_lr": best.params[PARAMETER]}}}
        assert f"Best: trial {best.number}," in (project / "data/08_reporting/tune_study.md").read_text()
    return trials


def trial_table(trials: list) -> str:
    """The trials as the closing note shows them: number, state, parameters, value, worker."""
    rows = [f"{t.number:>6}  {t.state.name:<8}  {t.params}  {t.value}  {t.user_attrs.get('worker')}" for t in trials]
    return "\n".join(["number  state     params  value  worker", *rows])
