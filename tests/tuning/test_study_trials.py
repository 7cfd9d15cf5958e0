"""Trials as the study runs them: a diverged loss is its parameters' result (pruned: it counts, the sampler sees it); a grid runs each combination once;
a joint entry sets its keys together."""

import json

from optuna.trial import TrialState

from fdsml.errors import DivergedError
from fdsml.tuning.config import parse_tune_params
from fdsml.tuning.objective import TrialObjective
from fdsml.tuning.outputs import best_overlay, best_trial, params_option, trials_table
from fdsml.tuning.study import baseline_values, run_study
from tests.support import TUNING_BASE, tune_params

LR = "pretrain.optimizer.base_lr"


class DivergingAboveOne(TrialObjective):
    """Trials stand in for pre-training: above base_lr 1 the loss diverges, below it the value is the rate."""

    def run(self, number, values, trial=None):
        if values[LR] > 1.0:
            raise DivergedError(f"pretrain: the loss is nan at step 3 (base_lr {values[LR]})")
        return values[LR], 4


def test_a_diverged_trial_is_pruned_counted_and_never_rerun(tmp_path):
    tune = tune_params(
        tmp_path,
        space=[{"key": LR, "choices": [0.5, 2.0, 0.25]}],
        sampler={"name": "grid", "seed": 0},
        budget={"n_trials": 3},
        baseline=False,
        finish_pruned=3,
    )
    objective = DivergingAboveOne(parse_tune_params(tune), {"pretrain": TUNING_BASE["pretrain"], "retrieval": TUNING_BASE["retrieval"]}, inputs=None)
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
    tune = tune_params(
        tmp_path,
        space=[{"key": LR, "choices": [0.5, 2.0]}, {"key": "pretrain.train.seed", "choices": [0, 1, 2]}],
        sampler={"name": "grid", "seed": 7},
        budget={"n_trials": 6},
        baseline=False,
    )
    objective = ValueOfItsParameters(parse_tune_params(tune), {"pretrain": TUNING_BASE["pretrain"], "retrieval": TUNING_BASE["retrieval"]}, inputs=None)
    study = run_study(objective)
    combinations = sorted((trial.params[LR], trial.params["pretrain.train.seed"]) for trial in study.get_trials())
    assert combinations == [(0.5, 0), (0.5, 1), (0.5, 2), (2.0, 0), (2.0, 1), (2.0, 2)]


P, K = "pretrain.data.classes_per_batch", "pretrain.data.instances_per_class"


class ValueOfItsBatchShape(TrialObjective):
    """The value is read off the configuration the trial runs: 100 P + K."""

    def run(self, number, values, trial=None):
        data = self.trial_configuration(number, values)["pretrain"]["data"]
        return 100 * data["classes_per_batch"] + data["instances_per_class"], 4


def test_a_joint_entry_sets_its_keys_together_and_the_best_overlay_holds_both(tmp_path):
    tune = tune_params(
        tmp_path,
        space=[{"keys": [P, K], "choices": [[4, 10], [8, 5], [10, 4]]}],  # P x K = 40 images in every trial
        sampler={"name": "grid", "seed": 0},
        budget={"n_trials": 3},
        baseline=False,
    )
    objective = ValueOfItsBatchShape(parse_tune_params(tune), {"pretrain": TUNING_BASE["pretrain"], "retrieval": TUNING_BASE["retrieval"]}, inputs=None)
    study = run_study(objective)
    ran = sorted((json.loads(trial.params[f"{P}+{K}"]), trial.value) for trial in study.get_trials())
    assert ran == [([4, 10], 410), ([8, 5], 805), ([10, 4], 1004)]
    assert best_overlay(study) == {"pretrain": {"data": {"classes_per_batch": 10, "instances_per_class": 4}}}
    assert params_option(study) == f"{P}=10,{K}=4"
    assert baseline_values(objective) == {f"{P}+{K}": "[8, 5]"}  # conf/base's P and K, as the joint parameter's value
