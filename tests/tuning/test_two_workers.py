"""Two workers started independently on one study (Optuna's journal file, as on a shared file system)."""

import time

import optuna
import pytest
import pandas as pd
import yaml
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from fdsml.tuning.outputs import best_trial
from tests.tuning.project import kedro_tune, tune_project

N_TRIALS = 4


def _read(journal):
    """The study as a fresh reader sees it."""
    return optuna.load_study(study_name="tiny", storage=JournalStorage(JournalFileBackend(str(journal))))


@pytest.mark.slow  # two Kedro runs side by side and a third: about 70 s on 2 idle cores
def test_two_workers_share_one_study_without_losing_or_repeating_a_trial(tmp_path):
    journal = tmp_path / "shared/tiny.log"
    journal.parent.mkdir()
    tune = {"storage": f"journal:{journal}", "budget": {"n_trials": N_TRIALS}, "pruner": {"name": "none"}, "sampler": {"seed": None}, "baseline": False}
    pretrain = {"train": {"max_steps": 2}}
    projects = [tune_project(tmp_path / name, tune=tune, pretrain=pretrain) for name in ("a", "b")]  # two machines' checkouts
    workers = {process.pid: (project, process) for project in projects for process in [kedro_tune(project, wait=False)]}
    finished = []
    while len(finished) < len(workers):
        finished += [pid for pid, (_, process) in workers.items() if pid not in finished and process.poll() is not None]
        time.sleep(0.2)
    for project, process in workers.values():
        assert process.returncode == 0, (project / "tune.log").read_text()[-3000:]

    trials = _read(journal).get_trials()
    assert [t.number for t in trials] == list(range(len(trials))) and N_TRIALS <= len(trials) <= N_TRIALS + 1
    assert {t.state for t in trials} == {TrialState.COMPLETE}
    assert len({t.params["pretrain.optimizer.base_lr"] for t in trials}) == len(trials), "each worker draws its own"
    pids = {int(t.user_attrs["worker"].rpartition(":")[2]) for t in trials}
    assert pids == set(workers), "both workers ran trials"
    for trial in trials:  # each trial ran once, in its worker's project, and its value is that run's
        own = workers[int(trial.user_attrs["worker"].rpartition(":")[2])][0]
        (other,) = [project for project in projects if project != own]
        assert list((own / trial.user_attrs["run_dir"]).glob("pretrain/*/last.pt")) and not (other / trial.user_attrs["run_dir"]).exists()
        live = pd.read_csv(own / f"data/08_reporting/live/tune/tiny/trial_{trial.number}/pretrain/plots/metrics/val_probe_recall_at_1.tsv", sep="\t")
        assert trial.value == live.loc[live["step"] == 2, "val_probe_recall_at_1"].item()

    first = workers[finished[0]][0]  # it may have ended while the other's last trial ran: it reads the study again
    again = kedro_tune(first)
    assert again.returncode == 0 and len(_read(journal).get_trials()) == len(trials), "a finished study adds no trial"
    best = best_trial(_read(journal))
    for project in projects:
        overlay = yaml.safe_load((project / "data/08_reporting/tune_best_params.yml").read_text())
        assert overlay == {"pretrain": {"optimizer": {"base_lr": best.params["pretrain.optimizer.base_lr"]}}}
        assert f"Best: trial {best.number}," in (project / "data/08_reporting/tune_study.md").read_text()
