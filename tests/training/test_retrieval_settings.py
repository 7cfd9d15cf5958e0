"""Retrieval fine-tuning builds what its configuration says: the proxy loss with its options and its proxies' rate
multiplier, with or without CouCE around it, the views with the data section's flip, and a bad data section refused."""

from __future__ import annotations

import pytest

from fdsml.config import ConfigError
from fdsml.data.retrieval_datasets import available_datasets
from fdsml.losses.couce.objective import CouCEObjective
from fdsml.training.objectives import ProxyObjective
from fdsml.training.retrieval import build_objective, parse_retrieval_params

LOSS = {"proxy_lr_multiplier": 7, "options": {"margin": 0.3}}


@pytest.mark.parametrize(("couce", "kind"), [(None, ProxyObjective), ({}, CouCEObjective)])
def test_the_objective_keeps_the_proxies_multiplier_and_the_loss_options(couce, kind):
    config = parse_retrieval_params({"couce": couce, "loss": LOSS, "embedding": {"embedding_dim": 8}})

    objective = build_objective(config, n_classes=4, seed=0)

    assert type(objective) is kind
    assert [group["lr_multiplier"] for group in objective.param_groups()] == [7.0]
    loss = objective.couce.loss if couce is not None else objective.loss
    assert loss.margin == 0.3 and loss.proxies.shape == (4, 8)


@pytest.mark.parametrize("flip", [True, False])
def test_the_training_view_flips_only_when_the_data_section_says_so(flip):
    data = parse_retrieval_params({"data": {"flip": flip, "image_size": 48}}).data

    train_view, test_view = data.transform(train=True), data.transform(train=False)

    assert (train_view.train, train_view.flip, train_view.size) == (True, flip, 48)
    assert test_view.train is False


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"batch_size": 0}, "retrieval.data.batch_size: must be positive, got 0"),
        ({"dataset": "nope"}, "retrieval.data.dataset: unknown dataset 'nope'; choose one of " + ", ".join(available_datasets())),
    ],
)
def test_a_bad_data_section_is_refused_naming_its_key(data, message):
    with pytest.raises(ConfigError) as refused:
        parse_retrieval_params({"data": data})

    assert str(refused.value) == message
