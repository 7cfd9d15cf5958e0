"""``pml``, the pair-loss control: Multi-Similarity on the class labels, by hand."""

import math

import pytest
import torch

from fdsml.config import ConfigError
from fdsml.losses.pair import build_pair_loss
from fdsml.training.pretrain import parse_pretrain_params
from fdsml.training.pretrain_objectives.recipe import objective_recipe
from fdsml.training.pretrain_objectives.pml import PairLossObjective

from .tiny_batch import PAIRS_LABELS, Fixed


def _multi_similarity(embeddings, labels, alpha=2.0, beta=50.0, base=0.5):
    """Multi-Similarity (Wang et al. 2019) on cosine similarities, every pair, averaged over anchors."""
    unit = [[x / math.hypot(*row) for x in row] for row in embeddings.tolist()]
    labels = labels.tolist()
    total = 0.0
    for i, u in enumerate(unit):
        similarity = [sum(a * b for a, b in zip(u, v)) for v in unit]
        positives = [similarity[j] for j in range(len(unit)) if j != i and labels[j] == labels[i]]
        negatives = [similarity[j] for j in range(len(unit)) if labels[j] != labels[i]]
        total += math.log1p(sum(math.exp(-alpha * (s - base)) for s in positives)) / alpha
        total += math.log1p(sum(math.exp(beta * (s - base)) for s in negatives)) / beta
    return total / len(unit)


def test_the_pair_loss_control_is_multi_similarity_on_the_class_labels_by_hand():
    embeddings = torch.tensor([[1.0, 0.2], [0.8, 0.5], [0.1, 1.0], [-0.3, 0.9]])
    objective = PairLossObjective(build_pair_loss("multi_similarity"))
    loss, _ = objective(Fixed(), {"image": embeddings, "label": PAIRS_LABELS})
    assert loss.item() == pytest.approx(_multi_similarity(embeddings, PAIRS_LABELS), rel=1e-5)
    crossed = torch.tensor([0, 1, 0, 1])  # the labels decide: other pairs, another loss
    other, _ = objective(Fixed(), {"image": embeddings, "label": crossed})
    assert other.item() == pytest.approx(_multi_similarity(embeddings, crossed), rel=1e-5)
    assert other.item() > loss.item()


def test_the_recipe_builds_the_loss_its_settings_name_and_asks_for_pairs_of_a_class():
    embeddings = torch.tensor([[1.0, 0.2], [0.8, 0.5], [0.1, 1.0], [-0.3, 0.9]])
    recipe = objective_recipe("pml")
    objective = recipe.build(recipe.settings(options={"alpha": 3.0}), num_classes=2, embedding_dim=2, seed=0)
    loss, _ = objective(Fixed(), {"image": embeddings, "label": PAIRS_LABELS})
    assert loss.item() == pytest.approx(_multi_similarity(embeddings, PAIRS_LABELS, alpha=3.0), rel=1e-5)
    with pytest.raises(ConfigError, match=r"instances_per_class.*the pml loss needs positive pairs, at least 2 instances per class"):
        parse_pretrain_params({"objective": "pml", "data": {"instances_per_class": 1}})
    assert parse_pretrain_params({"objective": "pml", "data": {"instances_per_class": 2}}).data.instances_per_class == 2


def test_the_pair_loss_settings_refuse_an_unknown_loss_or_a_value_the_library_refuses_naming_both():
    from fdsml.training.pretrain_objectives.pml import PairLossSettings

    with pytest.raises(ConfigError) as unknown:
        PairLossSettings(loss="nope")
    assert str(unknown.value) == "loss: unknown pair loss 'nope'; choose one of multi_similarity, contrastive, circle, ntxent, supcon"
    with pytest.raises(ConfigError, match=r"^options: circle does not take \{'m': 'x'\}: unsupported operand"):
        PairLossSettings(loss="circle", options={"m": "x"})
    assert PairLossObjective(build_pair_loss("multi_similarity")).param_groups() == []
