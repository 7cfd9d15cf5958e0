"""The pre-training objectives added for the fair comparison, by hand on tiny embeddings and descriptors:
cross-entropy plus PA-Triplet (``fdsl_pa``), the graded margin, the label-only triplet control and the pair-loss control."""

import math

import pytest
import torch
from torch import nn

from fdsml.losses.pa_triplet import graded_margins, mine_batch_triplets
from fdsml.losses.pair import build_pair_loss
from fdsml.training.objectives import (
    CrossEntropyPATripletObjective,
    LabelTripletObjective,
    PairLossObjective,
    PATripletObjective,
)


class Fixed(nn.Module):
    """A 'model' whose embeddings are its input rows: the losses can be computed by hand."""

    def forward(self, images):
        return images


LABELS = torch.tensor([0, 0, 0, 1, 1, 1])
PSI = torch.tensor([[0.0], [1.0], [3.0], [0.0], [2.0], [3.0]])
EMBEDDINGS = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [3.0, 1.0], [5.0, 5.0]])
# Filter same, positives by the descriptor (d_Psi = |psi_a - psi_c|), read off PSI by hand:
SAME_TRIPLETS = [(0, 1, 2), (1, 0, 2), (2, 1, 0), (3, 4, 5), (4, 5, 3), (5, 4, 3)]
MARGIN = 0.5
HEAD = torch.tensor([[1.0, -1.0], [-0.5, 0.5]])  # class head weights (2 classes x 2 dims), bias 0


def _hinge(a, p, n, margin=MARGIN):
    e = EMBEDDINGS.tolist()
    return max(0.0, math.dist(e[a], e[p]) - math.dist(e[a], e[n]) + margin)


def _cross_entropy():
    total = 0.0
    for row, label in zip(EMBEDDINGS.tolist(), LABELS.tolist()):
        logits = [sum(w * x for w, x in zip(weights, row)) for weights in HEAD.tolist()]
        total += math.log(sum(math.exp(z) for z in logits)) - logits[label]
    return total / len(LABELS)


def _fdsl_pa(weight, **triplet):
    triplet = PATripletObjective("same", margin=MARGIN, normalize_embeddings=False, **triplet)
    objective = CrossEntropyPATripletObjective(triplet, num_classes=2, embedding_dim=2, weight=weight)
    with torch.no_grad():
        objective.classifier.weight.copy_(HEAD)
        objective.classifier.bias.zero_()
    return objective


def _batch(embeddings=EMBEDDINGS):
    return {"image": embeddings, "label": LABELS, "psi": PSI}


def test_the_miner_orders_same_triplets_by_the_descriptor_as_read_by_hand():
    mined = mine_batch_triplets(LABELS, PSI, "same")
    assert sorted(zip(*(t.tolist() for t in mined))) == SAME_TRIPLETS


def test_fdsl_pa_is_cross_entropy_plus_the_weighted_pa_triplet_term_by_hand():
    loss, parts = _fdsl_pa(weight=0.5)(Fixed(), _batch())
    triplet = sum(_hinge(*t) for t in SAME_TRIPLETS) / len(SAME_TRIPLETS)
    assert loss.item() == pytest.approx(_cross_entropy() + 0.5 * triplet, rel=1e-6)
    assert parts["cross_entropy"].item() == pytest.approx(_cross_entropy(), rel=1e-6)
    assert parts["triplet_loss"].item() == pytest.approx(triplet, rel=1e-6)
    assert parts["triplets"] == 6
    nonzero = sum(_hinge(*t) > 0 for t in SAME_TRIPLETS) / 6
    assert parts["nonzero_fraction_same"].item() == pytest.approx(nonzero)
    # The positive is the descriptor's nearer candidate: with the sides swapped the term is another number.
    swapped = sum(_hinge(a, n, p) for a, p, n in SAME_TRIPLETS) / 6
    assert swapped != pytest.approx(triplet, rel=1e-3)


def test_fdsl_pa_avg_nonzero_divides_by_the_violating_triplets_only():
    _, parts = _fdsl_pa(weight=1.0, reducer="avg_nonzero")(Fixed(), _batch())
    hinges = [_hinge(*t) for t in SAME_TRIPLETS]
    assert 0 < sum(h > 0 for h in hinges) < 6  # the case tells the reducers apart
    assert parts["triplet_loss"].item() == pytest.approx(sum(hinges) / sum(h > 0 for h in hinges), rel=1e-6)


def _embedding_gradient(objective):
    embeddings = EMBEDDINGS.clone().requires_grad_(True)
    loss, _ = objective(Fixed(), _batch(embeddings))
    loss.backward()
    return embeddings.grad


def test_the_triplet_term_adds_weight_times_its_gradient_to_cross_entropys():
    cross_entropy_only = _embedding_gradient(_fdsl_pa(weight=0.0))
    one, three = _embedding_gradient(_fdsl_pa(weight=1.0)), _embedding_gradient(_fdsl_pa(weight=3.0))
    triplet_gradient = one - cross_entropy_only
    assert triplet_gradient.abs().sum() > 0
    torch.testing.assert_close(three - cross_entropy_only, 3 * triplet_gradient)


def test_the_class_head_is_the_objectives_own_and_trains():
    objective = _fdsl_pa(weight=1.0)
    [group] = objective.param_groups()
    assert {id(p) for p in group["params"]} == {id(objective.classifier.weight), id(objective.classifier.bias)}
    loss, _ = objective(Fixed(), _batch())
    loss.backward()
    assert objective.classifier.weight.grad.abs().sum() > 0
    assert set(objective.state_dict()) >= {"classifier.weight", "classifier.bias"}  # checkpointed with the run


def test_a_negative_weight_is_refused():
    with pytest.raises(ValueError, match="weight"):
        _fdsl_pa(weight=-0.1)


def test_graded_margins_are_the_margin_times_the_relative_descriptor_gap():
    triplets = tuple(torch.tensor(column) for column in zip(*SAME_TRIPLETS))
    # (d_an - d_ap) / max(d_ap, d_an), read off PSI: anchor 0: (3 - 1) / 3; anchor 1: (2 - 1) / 2; anchor 2: (3 - 2) / 3; ...
    gaps = [2 / 3, 1 / 2, 1 / 3, 1 / 3, 1 / 2, 2 / 3]
    torch.testing.assert_close(graded_margins(PSI, triplets, 0.6), torch.tensor([0.6 * g for g in gaps]))
    tie = graded_margins(torch.zeros(3, 1), (torch.tensor([0]), torch.tensor([1]), torch.tensor([2])), 0.6)
    assert tie.tolist() == [0.0]  # equal descriptors: no gap, no margin


def test_graded_margin_enters_the_loss_per_triplet():
    objective = PATripletObjective("same", margin=MARGIN, normalize_embeddings=False, graded_margin=True)
    loss, _ = objective(Fixed(), _batch())
    gaps = [2 / 3, 1 / 2, 1 / 3, 1 / 3, 1 / 2, 2 / 3]
    expected = sum(_hinge(*t, margin=MARGIN * g) for t, g in zip(SAME_TRIPLETS, gaps)) / 6
    assert loss.item() == pytest.approx(expected, rel=1e-6)


# The label-only control: P = 2 classes x K = 2, every (anchor, same-class, other-class) triplet, psi ignored.
PAIRS_LABELS = torch.tensor([0, 0, 1, 1])
LABEL_TRIPLETS = [(0, 1, 2), (0, 1, 3), (1, 0, 2), (1, 0, 3), (2, 3, 0), (2, 3, 1), (3, 2, 0), (3, 2, 1)]


def _triplets(indices):
    return sorted(zip(*(t.tolist() for t in indices)))


def test_label_triplets_take_the_positive_from_the_anchors_class_whatever_the_descriptor():
    mixed = torch.tensor([[0.0], [5.0], [1.0], [9.0]])  # anchor 0's other-class candidate 2 is nearer than its classmate 1
    assert _triplets(LabelTripletObjective().indices(PAIRS_LABELS, mixed, step=0)) == LABEL_TRIPLETS


def test_each_equals_the_label_triplet_loss_only_when_classmates_are_nearer_in_the_descriptor():
    """The issue's claim, checked: in batch mode ``each`` mines the label triplets, then orders each pair by the
    descriptor. Where every classmate is nearer than every other-class candidate (the classes apart in
    the descriptor) the two losses are the same triplets; where not, ``each`` swaps those triplets."""
    apart = torch.tensor([[0.0], [1.0], [10.0], [11.0]])
    assert _triplets(mine_batch_triplets(PAIRS_LABELS, apart, "each")) == LABEL_TRIPLETS
    mixed = torch.tensor([[0.0], [5.0], [1.0], [9.0]])
    each = _triplets(mine_batch_triplets(PAIRS_LABELS, mixed, "each"))
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


def _label_triplets(labels):
    """Every (anchor, classmate, other-class) triplet, read literally."""
    labels = labels.tolist()
    n = range(len(labels))
    return [(a, p, q) for a in n for p in n for q in n if p != a and labels[p] == labels[a] and labels[q] != labels[a]]


@pytest.mark.parametrize("objective", ["pa_triplet", "fdsl_pa", "label_triplet"])
@pytest.mark.parametrize("reducer", ["mean", "avg_nonzero"])
def test_every_triplet_objective_takes_its_reducer_from_the_configuration(objective, reducer, tmp_path):
    """The gradient-fading diagnostic: ``avg_nonzero`` divides by the violating triplets, ``mean`` by all, whichever
    objective carries the triplet term, and each logs the share of non-zero triplets."""
    from fdsml.training.pretrain_objectives import build_objective

    from .helpers import tiny_config

    loss_settings = {"reducer": reducer, "margin": MARGIN, "normalize_embeddings": False}
    if objective != "label_triplet":
        loss_settings["graded_margin"] = False  # one margin for every hand-computed hinge (fdsl_pa's default grades it)
    config = tiny_config(tmp_path, objective=objective, **{objective: loss_settings})
    built = build_objective(config, num_classes=2, embedding_dim=2)
    loss, parts = built(Fixed(), _batch())
    triplets = _label_triplets(LABELS) if objective == "label_triplet" else SAME_TRIPLETS
    hinges = [_hinge(*t) for t in triplets]
    nonzero = sum(h > 0 for h in hinges)
    assert 0 < nonzero < len(hinges)  # the case tells the reducers apart
    expected = sum(hinges) / (nonzero if reducer == "avg_nonzero" else len(hinges))
    term = parts["triplet_loss"] if objective == "fdsl_pa" else loss
    assert term.item() == pytest.approx(expected, rel=1e-6)
    suffix = "labels" if objective == "label_triplet" else "same"
    assert parts[f"nonzero_fraction_{suffix}"].item() == pytest.approx(nonzero / len(hinges))


@pytest.mark.parametrize("section", ["fdsl_pa", "label_triplet", "pml"])
def test_every_key_of_the_new_objectives_is_a_plain_parameter_of_conf_base_at_its_code_default(section):
    """A study searches ``pretrain.<section>.<key>``: each key is in conf/base, with the value the code defaults to."""
    import dataclasses
    from pathlib import Path

    import yaml

    from fdsml.training.pretrain import PretrainConfig

    conf = Path(__file__).resolve().parents[2] / "conf" / "base" / "parameters_pretrain.yml"
    written = yaml.safe_load(conf.read_text())["pretrain"][section]
    default = getattr(PretrainConfig(), section)
    assert written == {f.name: getattr(default, f.name) for f in dataclasses.fields(default)}
