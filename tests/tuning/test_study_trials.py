"""Trials as the study runs them: a diverged loss is its parameters' result (pruned: it counts, the sampler sees it); a grid runs each combination once."""

from optuna.trial import TrialState

from fdsml.errors import DivergedError
from fdsml.tuning import TrialObjective, parse_tune_params
from fdsml.tuning.outputs import best_trial, trials_table
from fdsml.tuning.study import run_study
from tests.tuning.test_bad_inputs import BASE, _tune

LR = "pretrain.optimizer.base_lr"


class DivergingAboveOne(TrialObjective):
    """Trials stand in for pre-training: above base_lr 1 the loss diverges, below it the value is the rate."""

    def run(self, number, values, trial=None):
        if values[LR] > 1.0:
            raise DivergedError(f"pretrain: the loss is nan at step 3 (base_lr {values[LR]})")
        return values[LR], 4


def test_a_diverged_trial_is_pruned_counted_and_never_rerun(tmp_path):
    tune = _tune(
        tmp_path,
        space=[{"key": LR, "choices": [0.5, 2.0, 0.25]}],
        sampler={"name": "grid", "seed": 0},
        budget={"n_trials": 3},
        baseline=False,
        finish_pruned=3,
    )
    objective = DivergingAboveOne(parse_tune_params(tune), {"pretrain": BASE["pretrain"], "retrieval": BASE["retrieval"]}, inputs=None)
    study = run_study(objective)
    trials = study.get_trials()
    assert len(trials) == 3  # the diverged trial used one of the three: no extra trial was drawn in its place
    (diverged,) = [trial for trial in trials if trial.params[LR] == 2.0]
    assert diverged.state == TrialState.PRUNED and "nan at step 3" in diverged.user_attrs["diverged"]
    assert not any(key.startswith("finished_pruned_trial_") for key in study.user_attrs)  # finish_pruned skipped it
    assert best_trial(study).params[LR] == 0.5
    table = trials_table(study)
    assert table.loc[table["number"] == diverged.number, "diverged"].item() is True
    assert table["diverged"].sum() == 1



class ValueOfItsParameters(TrialObjective):
    def run(self, number, values, trial=None):
        return values[LR] + values["pretrain.train.seed"], 4


def test_a_grid_study_runs_every_combination_exactly_once(tmp_path):
    tune = _tune(
        tmp_path,
        space=[{"key": LR, "choices": [0.5, 2.0]}, {"key": "pretrain.train.seed", "choices": [0, 1, 2]}],
        sampler={"name": "grid", "seed": 7},
        budget={"n_trials": 6},
        baseline=False,
    )
    objective = ValueOfItsParameters(parse_tune_params(tune), {"pretrain": BASE["pretrain"], "retrieval": BASE["retrieval"]}, inputs=None)
    study = run_study(objective)
    combinations = sorted((trial.params[LR], trial.params["pretrain.train.seed"]) for trial in study.get_trials())
    assert combinations == [(0.5, 0), (0.5, 1), (0.5, 2), (2.0, 0), (2.0, 1), (2.0, 2)]
