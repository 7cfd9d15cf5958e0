"""The fair comparison's tuning side by side: each arm's trials by state, trial 0, the best trial and its recipe."""

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from fdsml.config import env_parameters
from fdsml.tuning.config import parse_tune_params
from fdsml.tuning.study import load_study
from fdsml.tuning.summary import main, summary_row, tuning_summary
from tests.support import ROOT

LR = "pretrain.optimizer.base_lr"


def tune_params(tmp_path) -> dict:
    return env_parameters(str(ROOT / "conf"), "fair")["tune"] | {"storage_dir": str(tmp_path / "tune")}


def tuned(tune: dict, arm: str) -> optuna.Study:
    """The arm's study with trial 0 at 0.30, trial 1 the best at 0.50 (lr 0.02), trial 2 pruned."""
    study = load_study(parse_tune_params(tune | {"arm": arm}))
    distributions = {LR: FloatDistribution(1e-3, 1.0, log=True)}
    for value, lr, state in ((0.30, 0.1, TrialState.COMPLETE), (0.50, 0.02, TrialState.COMPLETE), (None, 0.5, TrialState.PRUNED)):
        study.add_trial(create_trial(params={LR: lr}, distributions=distributions, value=value, state=state))
    return study


def test_an_arms_row_counts_its_trials_and_names_trial_0_and_the_best_with_its_recipe(tmp_path):
    tune = tune_params(tmp_path)
    arm = next(iter(tune["arms"]))
    row = summary_row(arm, tuned(tune, arm))
    assert (row["trials"], row["complete"], row["pruned"], row["fail"]) == (3, 2, 1, 0)
    assert row["trial 0"] == 0.30 and (row["best"], row["best trial"]) == (0.50, 1)
    assert row["recipe"] == f"{LR} 0.02"


def test_every_arm_is_a_row_and_one_not_tuned_yet_has_no_trials(tmp_path):
    tune = tune_params(tmp_path)
    first, *others = tune["arms"]
    tuned(tune, first)
    table = tuning_summary(tune)
    lines = [line for line in table.splitlines() if line.startswith("| ")][1:]  # the rows, after the header
    assert [line.split("|")[1].strip() for line in lines] == [first, *others]
    assert "0.500" in lines[0] and "0.300" in lines[0] and f"{LR} 0.02" in lines[0]
    assert all(line.split("|")[2].strip() == "0" for line in lines[1:])  # no trials


def test_the_command_prints_the_table_of_an_environments_arms(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the studies' storage (conf/fair: a relative folder) is empty here
    main(["--env", "fair", "--conf-source", str(ROOT / "conf")])
    printed = capsys.readouterr().out
    assert printed.startswith("Maximising `") and all(f"| {arm} " in printed for arm in tune_params(tmp_path)["arms"])
