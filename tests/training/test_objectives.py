"""The fine-tuning objectives: cross-entropy over the class labels, smoothed as configured, and its accuracy, by hand;
the proxy loss's own optimiser group."""

import math

import pytest
import torch

from fdsml.losses.proxy import build_proxy_loss
from fdsml.training.loop_config import OptimizerConfig
from fdsml.training.objectives import CrossEntropyObjective, ProxyObjective
from fdsml.training.optimizer import build_optimizer

from .pretrain_objectives.tiny_batch import Fixed  # a 'model' whose outputs are its input rows


def test_cross_entropy_objective_by_hand_with_smoothing_and_its_accuracy():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 3.0], [1.0, 1.5, 0.0], [0.0, 0.0, 4.0]])
    labels = torch.tensor([0, 2, 1, 0])  # the top class is right for rows 0, 1 and 2
    loss, logged = CrossEntropyObjective(label_smoothing=0.3)(Fixed(), {"image": logits, "label": labels})
    expected = 0.0
    for row, label in zip(logits.tolist(), labels.tolist()):
        log_norm = math.log(sum(math.exp(z) for z in row))
        negative_log = [log_norm - z for z in row]
        expected += 0.7 * negative_log[label] + 0.3 * sum(negative_log) / 3
    assert loss.item() == pytest.approx(expected / 4, rel=1e-6)
    assert logged["accuracy"].item() == 0.75


def test_the_proxies_train_at_their_multiple_of_the_rate_without_weight_decay():
    """The proxy loss's own parameters form one optimiser group at ``proxy_lr_multiplier`` x the rate, never decayed,
    while the model's groups keep the rate and the configured decay."""
    model = torch.nn.Module()
    model.backbone, model.head = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    loss = build_proxy_loss("proxy_anchor", 3, 2)
    optimizer = build_optimizer(model, ProxyObjective(loss, 50.0), OptimizerConfig(name="sgd", base_lr=0.1, weight_decay=1e-4), 0.1)
    groups = [(group["lr"], group["weight_decay"], group["params"]) for group in optimizer.param_groups]
    assert [(lr, decay) for lr, decay, _ in groups] == [(0.1, 1e-4), (0.1, 1e-4), (pytest.approx(5.0), 0.0)]
    assert [id(p) for p in groups[2][2]] == [id(p) for p in loss.parameters()] and len(groups[2][2]) > 0


def test_cross_entropy_is_unsmoothed_unless_asked():
    logits, labels = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]]), torch.tensor([0, 1])
    loss, _ = CrossEntropyObjective()(Fixed(), {"image": logits, "label": labels})
    assert loss.item() == pytest.approx(torch.nn.functional.cross_entropy(logits, labels).item(), rel=1e-6)
