"""Classification's settings and how a run is assembled: each refusal names its key, and what a fine-tuning run is
given (its task, its run's definition, its plan, its reader) is what the configuration and the dataset say."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
import pytest
import torch

from fdsml.config import ConfigError
from fdsml.models import build_model, model_payload
from fdsml.models.starting_points import StartingPoint
from fdsml.training import classification
from fdsml.training.classification import DatasetSettings, MixupObjective, parse_classification_params, train_transform
from fdsml.training.finetune import defining_start

from tests.support import tiny_classification_splits

KNOWN = "cifar10, cifar100, csv, digits, fashion_mnist, flowers102, imagefolder, imagenet100, imagenet1k, places30, stanford_cars"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"datasets": [{"name": "digits", "batch_size": 0}]}, "classification.datasets[0].batch_size: must be positive, got 0"),
        ({"datasets": [{"name": "nope"}]}, f"classification.datasets[0].name: unknown dataset 'nope'; choose one of {KNOWN}"),
        ({"augment": {"area_range": [0.5, 1.5]}}, "classification.augment.area_range: range [0.5, 1.5] must lie inside [1e-06, 1.0]"),
        ({"augment": {"ratio_range": [2.0, 1.0]}}, "classification.augment.ratio_range: range [2.0, 1.0] is empty or inverted"),
        ({"augment": {"crop_fraction": 0.0}}, "classification.augment.crop_fraction: must lie in (0, 1], got 0.0"),
        ({"mixup": {"mixup_alpha": -1.0}}, "classification.mixup.mixup_alpha, cutmix_alpha: must be >= 0, got -1.0, 0.0"),
        ({"mixup": {"cutmix_alpha": -1.0}}, "classification.mixup.mixup_alpha, cutmix_alpha: must be >= 0, got 0.0, -1.0"),
        ({"mixup": {"prob": 2.0}}, "classification.mixup.prob: must lie in [0, 1], got 2.0"),
        ({"mixup": {"switch_prob": 1.5}}, "classification.mixup.switch_prob: must lie in [0, 1], got 1.5"),
        ({"image_size": 0}, "classification.image_size: must be positive, got 0"),
        ({"eval_batch_size": 0}, "classification.eval_batch_size: must be positive, got 0"),
        ({"eval_workers": -1}, "classification.eval_workers: must be >= 0, got -1"),
        ({"label_smoothing": 1.5}, "classification.label_smoothing: must lie in [0, 1], got 1.5"),
        ({"datasets": []}, "classification.datasets, starting_points: give at least one of each"),
        ({"starting_points": []}, "classification.datasets, starting_points: give at least one of each"),
        ({"datasets": [{"name": "digits"}, {"name": "digits"}]}, "classification.datasets: names must be unique, got ['digits', 'digits']"),
        ({"starting_points": [{"name": "a"}, {"name": "a"}]}, "classification.starting_points: names must be unique"),
        ({"starting_points": [{"name": "a", "base_lr": -1}]}, "classification.starting_points[0].base_lr: must be a positive learning rate"),
    ],
)
def test_each_refused_setting_is_named_by_its_full_key(params, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        parse_classification_params(params)


def test_the_smallest_crop_area_and_every_fraction_of_one_are_accepted():
    config = parse_classification_params({"augment": {"area_range": [1e-6, 1.0], "crop_fraction": 1.0}, "mixup": {"switch_prob": 1.0}})
    assert (config.augment.area_range, config.augment.crop_fraction, config.mixup.switch_prob) == ((1e-6, 1.0), 1.0, 1.0)


def test_the_training_view_is_built_from_the_augment_settings():
    config = parse_classification_params(
        {"image_size": 24, "augment": {"random_crop": True, "area_range": [0.3, 0.6], "ratio_range": [0.9, 1.1], "crop_fraction": 0.5}}
    )
    view = train_transform(config)
    assert (view.size, view.train, view.crop_fraction, view.area_range, view.ratio_range) == (24, True, 0.5, (0.3, 0.6), (0.9, 1.1))
    assert train_transform(parse_classification_params({"augment": {"random_crop": False}})).train is False


class Stop(Exception):
    """Raised by a spy once it has seen its call: the rest of the run is not this test's."""


def wired_config():
    return parse_classification_params(
        {"datasets": [{"name": "digits", "batch_size": 4}], "image_size": 16, "batch_size": 8, "mixup": {"mixup_alpha": 0.2},
         "train": {"max_steps": 2, "device": "cpu", "seed": 5}}
    )  # fmt: skip


def test_a_fine_tuning_run_is_given_its_task_its_datasets_definition_reader_and_plan(monkeypatch):
    """What ``finetune`` receives: the task keyed ``classification`` with the dataset reader's module in its code, the
    configured image size and head, an objective over the dataset's classes, the plan of the dataset's own batch, and a
    run defined by the dataset's settings (so two datasets of one name never share a checkpoint)."""
    seen = {}

    def spy(task, records, run, **kwargs):
        seen.update(task=task, records=records, run=run, **kwargs)
        raise Stop

    monkeypatch.setattr(classification, "finetune", spy)
    config, data, start = wired_config(), tiny_classification_splits("digits"), StartingPoint("scratch")
    plan, live = object(), object()
    with pytest.raises(Stop):
        classification.finetune_classifier(data, start, config, dataset=config.datasets[0], plan=plan, live=live)
    task, run = seen["task"], seen["run"]
    assert (task.key, task.code) == ("classification", ("fdsml.training.classification", "fdsml.data.readers.digits"))
    assert (task.image_size, task.head) == (16, {"head": "classifier", "num_classes": 3})
    objective = task.objective(0)
    assert isinstance(objective, MixupObjective) and objective.num_classes == 3
    assert task.plan(12, 1).batch_per_replica == 4  # the dataset's own batch, found by its name
    assert run.defines == {"dataset": DatasetSettings("digits", batch_size=4), "start": defining_start(start)}
    assert (run.folder, run.seed) == ("digits/scratch", 5)
    assert seen["records"] is data.train and seen["plan"] is plan and seen["live"] is live
    monkeypatch.setattr(classification, "finetune", spy)
    with pytest.raises(Stop):
        classification.finetune_classifier(data, start, config)  # splits made by hand: no reader, defined by name
    assert seen["task"].code == ("fdsml.training.classification",) and seen["run"].defines["dataset"] == {"name": "digits"}


def test_a_start_is_scored_through_its_payload_logged_and_returned_with_its_plan(monkeypatch, caplog):
    """``classify_start`` hands the dataset, plan and live run to the fine-tuning and scores the model it returns."""
    seen = {}
    torch.manual_seed(0)
    payload = model_payload(build_model("resnet18", embedding_dim=8, img_size=16))
    history = pd.DataFrame({"step": [1]})

    def fine_tuned(data, start, config, **kwargs):
        seen.update(kwargs)
        return payload, history

    def scored(model, records, config):
        seen["scored"] = records
        return {"top1": 0.25, "top5": 0.75}, np.array([True, False])

    monkeypatch.setattr(classification, "finetune_classifier", fine_tuned)
    monkeypatch.setattr(classification, "evaluate_classifier_scores", scored)
    config, data, plan = wired_config(), tiny_classification_splits("digits"), object()
    with caplog.at_level(logging.INFO, logger=classification.__name__):
        result = classification.classify_start(config, config.datasets[0], data, StartingPoint("scratch"), plan)
    assert seen["dataset"] == config.datasets[0] and seen["plan"] is plan and seen["live"] is None
    assert seen["scored"] is data.test
    assert (result.payload, result.plan, result.scores, result.history) == (payload, plan, {"top1": 0.25, "top5": 0.75}, history)
    assert caplog.messages == ["Fine-tuning scratch on digits", "scratch on digits: top-1 0.2500, top-5 0.7500"]


def test_the_test_split_is_scored_in_the_configured_batches_and_workers(monkeypatch):
    seen = {}

    def spy(model, dataset, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr("fdsml.evaluation.classification.classification_scores", spy)
    config = parse_classification_params({"eval_batch_size": 3, "eval_workers": 1, "train": {"device": "cpu"}})
    with pytest.raises(Stop):
        classification.evaluate_classifier_scores(torch.nn.Identity(), tiny_classification_splits("digits").test, config)
    assert (seen["batch_size"], seen["workers"], seen["device"].type) == (3, 1, "cpu")


def test_each_dataset_is_read_from_its_root_with_the_training_seed(monkeypatch):
    calls = []
    monkeypatch.setattr(classification, "read_classification_dataset", lambda name, root, *, seed: calls.append((name, root, seed)) or name)
    config = parse_classification_params(
        {"datasets": [{"name": "csv", "root": "/data/own"}, {"name": "digits"}], "train": {"seed": 9}}
    )
    assert classification.read_datasets(config) == {"csv": "csv", "digits": "digits"}
    assert calls == [("csv", "/data/own", 9), ("digits", None, 9)]
