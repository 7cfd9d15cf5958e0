"""Training plans: the published configurations are feasible, the numbers are right, and an impossible plan stops a run at start."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from fdsml.config import ConfigError
from fdsml.plan import PIPELINES, load_parameters, main, plan_steps
from fdsml.training import classification as classification_module
from fdsml.training import pretrain as pretrain_module
from fdsml.training.classification import parse_classification_params, plan_classification, run_classification
from fdsml.training.pretrain import plan_pretrain
from fdsml.training.retrieval import parse_retrieval_params, plan_retrieval

from tests.support import ROOT, TINY_SPEC
from .helpers import tiny_config

CONF = ROOT / "conf"


@pytest.mark.parametrize("env", ["base", "paper"])
@pytest.mark.parametrize("world_size", [1, 8, 64])
def test_every_training_plan_of_base_and_paper_is_feasible(env, world_size):
    plans = plan_steps(load_parameters(env, [], CONF), PIPELINES, world_size)
    assert {plan.step.split("/")[0] for plan in plans} == set(PIPELINES)
    for plan in plans:
        assert plan.problems() == [], plan.problems()
        assert plan.warmup_steps < plan.total_steps and plan.batches_per_replica >= 1


def test_paper_classification_warms_up_for_a_fraction_of_every_dataset():
    plans = plan_steps(load_parameters("paper", [], CONF), ("classification",), 8)
    for plan in plans:
        assert plan.warmup_steps == round(plan.total_steps * 5 / 300)
        assert plan.batches_per_replica >= 10, f"{plan.step}: {plan.batches_per_replica} steps per epoch"


def test_the_numbers_match_hand_computed_values():
    config = parse_classification_params(
        {
            "batch_size": 10,
            "optimizer": {"name": "adamw", "base_lr": 0.1, "reference_batch": 40, "schedule": "warmup_cosine",
                          "warmup_steps": 0, "warmup_fraction": 0.25},
            "train": {"epochs": 3},
        }
    )
    plan = plan_classification(config, "digits", 105, 2).check()
    # 105 // 10 = 10 global batches, 5 per replica; 3 epochs; warm-up round(0.25 * 15) = 4; lr 0.1 * 20 / 40
    assert (plan.global_batches_per_epoch, plan.batches_per_replica, plan.total_steps, plan.warmup_steps) == (10, 5, 15, 4)
    assert plan.global_batch == 20 and plan.images_per_epoch == 100
    assert plan.learning_rates == pytest.approx({"trunk": 0.05, "head": 0.05})

    retrieval = parse_retrieval_params({"data": {"batch_size": 8}, "loss": {"proxy_lr_multiplier": 100},
                                        "optimizer": {"base_lr": 1e-4, "reference_batch": 32}, "train": {"max_steps": 7}})
    plan = plan_retrieval(retrieval, 100, 4).check()  # 12 global batches, 3 per replica, max_steps wins
    assert (plan.batches_per_replica, plan.total_steps) == (3, 7)
    assert plan.learning_rates == pytest.approx({"trunk": 1e-4, "head": 1e-4, "proxies": 1e-2})

    pretrain = tiny_config("unused", data={"classes_per_batch": 4, "instances_per_class": 3}, train={"max_steps": None, "epochs": 2})
    plan = plan_pretrain(pretrain, 100, 3).check()
    # B = 12: 100 // 12 = 8 global batches, 2 per replica; filter same: C(2, 2) = 1 triplet per anchor, 12 per batch
    assert (plan.batches_per_replica, plan.total_steps, plan.triplets_per_batch) == (2, 4, 12)
    assert plan.triplet_mining_bytes == 72 * 12**2 + 104 * 12
    assert plan_pretrain(pretrain, 20, 8).batches_per_replica == 1  # at least one rendered batch per replica


@pytest.mark.parametrize(
    "params, images, world_size, key",
    [
        ({"optimizer": {"schedule": "warmup_cosine", "warmup_steps": 30}, "train": {"epochs": 1}}, 200, 1,
         "classification.optimizer.warmup_steps"),  # 20 steps, 30 of warm-up
        ({"batch_size": 64}, 200, 8, "classification.batch_size"),  # 3 batches for 8 replicas
        ({"batch_size": 64}, 50, 1, "classification.batch_size"),  # no batch at all: zero steps
        ({"datasets": [{"name": "digits", "batch_size": 300}]}, 200, 1, r"classification.datasets\[0\].batch_size"),
    ],
)
def test_an_impossible_plan_is_refused_naming_the_key(params, images, world_size, key):
    plan = plan_classification(parse_classification_params({"batch_size": 10} | params), "digits", images, world_size)
    with pytest.raises(ConfigError, match=key):
        plan.check()


def test_a_refused_dataset_stops_classification_before_any_dataset_trains(tmp_path, monkeypatch):
    read = classification_module.read_classification_dataset

    def tiny_cifar(name, root=None, *, seed=0):  # digits as it is, and a 'cifar10' of 40 images
        splits = read("digits", None, seed=seed)
        if name == "digits":
            return splits
        small = splits.train.subset(pd.Series(range(len(splits.train))).lt(40).to_numpy())
        return classification_module.ClassificationSplits(name, small, splits.test, splits.num_classes)

    monkeypatch.setattr(classification_module, "read_classification_dataset", tiny_cifar)
    config = parse_classification_params(
        {"datasets": [{"name": "digits"}, {"name": "cifar10", "root": "unused"}], "batch_size": 64,
         "train": {"device": "cpu", "max_steps": 1}, "run_dir": str(tmp_path / "runs")}
    )
    with pytest.raises(ConfigError, match=r"classification/cifar10 .*classification.batch_size"):
        run_classification(config)
    assert not (tmp_path / "runs").exists()  # digits, first in the list, did not train


def test_a_refused_pretraining_builds_no_model(tiny_table, tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain_module, "build_pretrain_model", lambda *a, **k: pytest.fail("a model was built"))
    config = tiny_config(tmp_path / "run", data={"batches_per_epoch": 2}, train={"max_steps": None, "epochs": 1},
                         optimizer={"schedule": "warmup_cosine", "warmup_steps": 5})
    with pytest.raises(ConfigError, match="pretrain.optimizer.warmup_steps"):
        pretrain_module.pretrain(tiny_table, TINY_SPEC, config)
    assert not (tmp_path / "run").exists()


def test_warmup_steps_and_fraction_are_not_given_together():
    with pytest.raises(ConfigError, match="classification.optimizer.warmup_steps: give warmup_steps"):
        parse_classification_params({"optimizer": {"warmup_steps": 10, "warmup_fraction": 0.1}})


def test_the_command_prints_the_plan_and_fails_on_an_impossible_one(capsys):
    assert main(["--env", "paper", "--world-size", "8", "--pipelines", "pretrain", "--conf-source", str(CONF)]) == 0
    printed = capsys.readouterr().out
    assert "total steps" in printed and "64,320" in printed and "global 2,040" in printed  # 980,100 rows, 85 triplets a replica
    params = "classification.batch_size=4096"
    assert main(["--world-size", "8", "--pipelines", "classification", "--params", params, "--conf-source", str(CONF)]) == 1
    assert "REFUSED" in capsys.readouterr().out


def test_the_command_refuses_a_key_given_twice(capsys):
    params = "classification.batch_size=8,classification.batch_size=4096"
    assert main(["--pipelines", "classification", "--params", params, "--conf-source", str(CONF)]) == 2
    assert "--params: classification.batch_size is given twice" in capsys.readouterr().err


class PlanSeen(Exception):
    """Raised by the stand-in for the loop, carrying the plan it was given."""


def test_the_printed_pretraining_plan_is_the_plan_the_run_trains_with(monkeypatch, tmp_path):
    """The held-out rows (fractals.holdout) are not trained on: the printed plan leaves them out too."""
    from fdsml.families.finefractaldb import generate_finefractaldb
    from fdsml.data.fractals_config import parse_fractals_params
    from fdsml.pipelines.pretrain.nodes import pretrain_model

    small = ["fractals.n_classes=6", "fractals.instances_per_class=9", "fractals.render.size=32", "fractals.render.points=600",
             "fractals.class_filter.size=96", "fractals.class_filter.points=4000", "pretrain.train.device=cpu",
             "pretrain.data.classes_per_batch=3", "pretrain.data.instances_per_class=4", "fractals.holdout.instance_fraction=0.25",
             "fractals.holdout.gap=0",  # with a guard band the printed rows are an upper bound (the guard is drawn from the table)
             f"pretrain.live_dir={tmp_path / 'live'}"]  # not the checkout's data/08_reporting/live
    parameters = load_parameters("base", small, CONF)
    printed = plan_steps(parameters, ("pretrain",), 1)[0]

    def seen(*args, plan, **kwargs):
        raise PlanSeen(plan)

    monkeypatch.setattr(pretrain_module, "train", seen)
    table, _ = generate_finefractaldb(parse_fractals_params(parameters["fractals"]).spec.settings)
    with pytest.raises(PlanSeen) as run:
        pretrain_model(table, {"materialized": False}, parameters["fractals"], parameters["pretrain"])
    trained = run.value.args[0]
    assert trained.images == 5 * 7 < len(table)  # 1 of 6 classes held out whole, 2 of 9 instances of the others
    assert dataclasses.replace(printed, notes=()) == dataclasses.replace(trained, notes=())
