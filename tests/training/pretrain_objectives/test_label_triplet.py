"""``label_triplet``, the label-only control: its triplets and its loss by hand, its batches and its section.

The template of a new objective's test: the loss against a hand computation on a tiny batch, what its recipe
tells pre-training (batches, what a batch must hold), and a short pre-training with it.
"""

import math

import pytest
import torch

from fdsml.config import ConfigError
from fdsml.losses.pa_triplet import mine_batch_triplets
from fdsml.training.pretrain import parse_pretrain_params, pretrain
from fdsml.training.pretrain_objectives.label_triplet import LabelTripletObjective, LabelTripletSettings
from fdsml.training.pretrain_objectives.recipe import objective_recipe

from tests.support import TINY_SPEC
from .tiny_batch import LABEL_TRIPLETS, MARGIN, PAIRS_LABELS, Fixed, triplet_list

def test_label_triplets_take_the_positive_from_the_anchors_class_whatever_the_descriptor():
    mixed = torch.tensor([[0.0], [5.0], [1.0], [9.0]])  # anchor 0's other-class candidate 2 is nearer than its classmate 1
    assert triplet_list(LabelTripletObjective().indices(PAIRS_LABELS, mixed, step=0)) == LABEL_TRIPLETS


def test_max_triplets_keeps_a_subset_of_the_label_triplets_drawn_per_step_and_seed():
    """3 classes x 3 images: 108 label triplets; ``max_triplets`` keeps that many of them, the same for the same
    (seed, step), another for another step or seed."""
    labels, psi = torch.arange(3).repeat_interleave(3), torch.zeros(9, 1)
    every = set(triplet_list(LabelTripletObjective().indices(labels, psi, step=0)))
    kept = lambda seed, step: triplet_list(LabelTripletObjective(max_triplets=10, seed=seed).indices(labels, psi, step))
    assert len(every) == 108 and len(kept(0, 4)) == 10 and set(kept(0, 4)) < every
    assert kept(0, 4) == kept(0, 4) and kept(0, 4) != kept(0, 5) and kept(0, 4) != kept(1, 4)
    built = objective_recipe("label_triplet").build(LabelTripletSettings(max_triplets=10), num_classes=3, embedding_dim=2, seed=1)
    assert triplet_list(built.indices(labels, psi, 4)) == kept(1, 4)  # built under the run's seed


def test_each_equals_the_label_triplet_loss_only_when_classmates_are_nearer_in_the_descriptor():
    """The issue's claim, checked: in batch mode ``each`` mines the label triplets, then orders each pair by the
    descriptor. Where every classmate is nearer than every other-class candidate (the classes apart in
    the descriptor) the two losses are the same triplets; where not, ``each`` swaps those triplets."""
    apart = torch.tensor([[0.0], [1.0], [10.0], [11.0]])
    assert triplet_list(mine_batch_triplets(PAIRS_LABELS, apart, "each")) == LABEL_TRIPLETS
    mixed = torch.tensor([[0.0], [5.0], [1.0], [9.0]])
    each = triplet_list(mine_batch_triplets(PAIRS_LABELS, mixed, "each"))
    swapped = sorted(set(each) - set(LABEL_TRIPLETS))
    # anchor 0: d(0,1) = 5 > d(0,2) = 1 (but < d(0,3) = 9); anchor 1: d(1,0) = 5 > d(1,2) = d(1,3) = 4;
    # anchor 2: d(2,3) = 8 > d(2,0) = 1, d(2,1) = 4; anchor 3: d(3,2) = 8 > d(3,1) = 4 (but < d(3,0) = 9)
    assert swapped == [(0, 2, 1), (1, 2, 0), (1, 3, 0), (2, 0, 3), (2, 1, 3), (3, 1, 2)]


def test_label_triplet_loss_by_hand_and_its_parts_under_labels():
    embeddings = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    objective = LabelTripletObjective(margin=MARGIN, normalize_embeddings=False)
    loss, parts = objective(Fixed(), {"image": embeddings, "label": PAIRS_LABELS, "psi": torch.zeros(4, 1)})
    e = embeddings.tolist()
    hinges = [max(0.0, math.dist(e[a], e[p]) - math.dist(e[a], e[n]) + MARGIN) for a, p, n in LABEL_TRIPLETS]
    assert loss.item() == pytest.approx(sum(hinges) / 8, rel=1e-6)
    assert parts["nonzero_fraction_labels"].item() == pytest.approx(sum(h > 0 for h in hinges) / 8)
    ordered = sum(math.dist(e[a], e[p]) < math.dist(e[a], e[n]) for a, p, n in LABEL_TRIPLETS) / 8
    assert parts["triplet_accuracy_labels"].item() == pytest.approx(ordered)


def test_its_recipe_asks_for_class_balanced_batches_with_two_classes_of_two_instances():
    config = parse_pretrain_params({"objective": "label_triplet"})
    assert config.batches.kind == "class_balanced" and not config.shuffled_batches
    with pytest.raises(ConfigError, match=r"^pretrain.data.classes_per_batch: filter 'each' needs at least 2 classes per batch, got 1"):
        parse_pretrain_params({"objective": "label_triplet", "data": {"classes_per_batch": 1}})
    with pytest.raises(ConfigError, match=r"^pretrain.data.instances_per_class: filter 'each' needs at least 2 instances"):
        parse_pretrain_params({"objective": "label_triplet", "data": {"instances_per_class": 1}})
    with pytest.raises(ConfigError, match=r"^pretrain.label_triplet.reducer: 'sum' is not accepted"):
        parse_pretrain_params({"objective": "label_triplet", "label_triplet": {"reducer": "sum"}})


def test_a_short_pretraining_mines_every_label_triplet_of_each_batch(tiny_table, tmp_path):
    """3 classes x 3 instances: each anchor has 2 classmates and 6 other-class images, 9 x 2 x 6 = 108 triplets."""
    from tests.training.helpers import tiny_config

    payload, history = pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path, objective="label_triplet", train={"max_steps": 2}))
    assert history["triplets"].tolist() == [108, 108]
    assert payload["model"]["head"] == "embedding"
    assert {k: payload["metadata"][k] for k in ("objective", "filter", "mode")} == {"objective": "label_triplet", "filter": None, "mode": None}
