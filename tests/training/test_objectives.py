"""The FDSL objective: cross-entropy over the class labels, smoothed as configured, and its accuracy, by hand."""

import math

import pytest
import torch

from fdsml.training.objectives import CrossEntropyObjective

from .pretrain_objectives.tiny_batch import Fixed  # a 'model' whose outputs are its input rows


def test_cross_entropy_objective_by_hand_with_smoothing_and_its_accuracy():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 3.0], [1.0, 1.5, 0.0], [0.0, 0.0, 4.0]])
    labels = torch.tensor([0, 1, 1, 0])  # the top class is right for rows 0 and 2
    loss, logged = CrossEntropyObjective(label_smoothing=0.3)(Fixed(), {"image": logits, "label": labels})
    expected = 0.0
    for row, label in zip(logits.tolist(), labels.tolist()):
        log_norm = math.log(sum(math.exp(z) for z in row))
        negative_log = [log_norm - z for z in row]
        expected += 0.7 * negative_log[label] + 0.3 * sum(negative_log) / 3
    assert loss.item() == pytest.approx(expected / 4, rel=1e-6)
    assert logged["accuracy"].item() == 0.5
