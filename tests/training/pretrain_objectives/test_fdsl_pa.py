"""``fdsl_pa``: cross-entropy plus the weighted PA-Triplet term, by hand, and its own class head."""

import math

import pytest
import torch

from fdsml.training.pretrain import pretrain
from fdsml.training.pretrain_objectives.fdsl_pa import CrossEntropyPATripletObjective
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective
from fdsml.training.pretrain_objectives.recipe import objective_recipe

from tests.support import TINY_SPEC
from tests.training.helpers import tiny_config
from .tiny_batch import EMBEDDINGS, LABELS, MARGIN, SAME_TRIPLETS, Fixed, hand_batch, hinge

HEAD = torch.tensor([[1.0, -1.0], [-0.5, 0.5]])  # class head weights (2 classes x 2 dims), bias 0


def _cross_entropy():
    total = 0.0
    for row, label in zip(EMBEDDINGS.tolist(), LABELS.tolist()):
        logits = [sum(w * x for w, x in zip(weights, row)) for weights in HEAD.tolist()]
        total += math.log(sum(math.exp(z) for z in logits)) - logits[label]
    return total / len(LABELS)


def _fdsl_pa(weight, label_smoothing=0.0, **triplet):
    triplet = PATripletObjective("same", margin=MARGIN, normalize_embeddings=False, **triplet)
    objective = CrossEntropyPATripletObjective(triplet, num_classes=2, embedding_dim=2, weight=weight, label_smoothing=label_smoothing)
    with torch.no_grad():
        objective.classifier.weight.copy_(HEAD)
        objective.classifier.bias.zero_()
    return objective


def test_fdsl_pa_is_cross_entropy_plus_the_weighted_pa_triplet_term_by_hand():
    loss, parts = _fdsl_pa(weight=0.5)(Fixed(), hand_batch())
    triplet = sum(hinge(*t) for t in SAME_TRIPLETS) / len(SAME_TRIPLETS)
    assert loss.item() == pytest.approx(_cross_entropy() + 0.5 * triplet, rel=1e-6)
    assert parts["cross_entropy"].item() == pytest.approx(_cross_entropy(), rel=1e-6)
    assert parts["triplet_loss"].item() == pytest.approx(triplet, rel=1e-6)
    assert parts["triplets"] == 6
    nonzero = sum(hinge(*t) > 0 for t in SAME_TRIPLETS) / 6
    assert parts["nonzero_fraction_same"].item() == pytest.approx(nonzero)
    # The positive is the descriptor's nearer candidate: with the sides swapped the term is another number.
    swapped = sum(hinge(a, n, p) for a, p, n in SAME_TRIPLETS) / 6
    assert swapped != pytest.approx(triplet, rel=1e-3)


def test_fdsl_pa_smooths_its_class_targets_and_scores_its_heads_top_class():
    """Smoothing s: (1 - s) x the cross-entropy + s x the mean of -log p over the classes. The head's logits (by hand from
    HEAD) put rows 0 and 1 in their class, the others in class 0 (the last a tie, argmax's first): accuracy 2/6."""
    _, parts = _fdsl_pa(weight=1.0, label_smoothing=0.3)(Fixed(), hand_batch())
    log_p = torch.log_softmax(EMBEDDINGS @ HEAD.T, dim=1)
    smoothed = (0.7 * -log_p[torch.arange(6), LABELS] + 0.3 * -log_p.mean(dim=1)).mean()
    assert parts["cross_entropy"].item() == pytest.approx(smoothed.item(), rel=1e-6)
    assert parts["cross_entropy"].item() != pytest.approx(_cross_entropy(), rel=1e-3)
    assert parts["accuracy"].item() == pytest.approx(2 / 6)


def test_fdsl_pa_subsamples_its_triplets_by_the_step():
    objective = _fdsl_pa(weight=1.0, max_triplets=2)
    terms = [objective(Fixed(), hand_batch(), step)[1]["triplet_loss"].item() for step in range(6)]
    assert terms[3] == pytest.approx(objective.triplet.term(EMBEDDINGS, hand_batch(), 3)[0].item())
    assert len(set(terms)) > 1  # each step its own subset


def test_the_recipe_builds_the_objective_its_settings_and_seed_describe():
    recipe = objective_recipe("fdsl_pa")
    settings = recipe.settings(filter="each", weight=2.5, label_smoothing=0.1, max_triplets=7)
    objective = recipe.build(settings, num_classes=5, embedding_dim=3, seed=11)
    assert (objective.weight, objective.label_smoothing, objective.classifier.out_features) == (2.5, 0.1, 5)
    triplet = objective.triplet
    assert (triplet.filter_name, triplet.mode, triplet.max_triplets, triplet.seed) == ("each", "batch", 7, 11)
    assert recipe.describe(settings) == {"filter": "each", "mode": None}


def test_fdsl_pa_avg_nonzero_divides_by_the_violating_triplets_only():
    _, parts = _fdsl_pa(weight=1.0, reducer="avg_nonzero")(Fixed(), hand_batch())
    hinges = [hinge(*t) for t in SAME_TRIPLETS]
    assert 0 < sum(h > 0 for h in hinges) < 6  # the case tells the reducers apart
    assert parts["triplet_loss"].item() == pytest.approx(sum(hinges) / sum(h > 0 for h in hinges), rel=1e-6)


def _embedding_gradient(objective):
    embeddings = EMBEDDINGS.clone().requires_grad_(True)
    loss, _ = objective(Fixed(), hand_batch(embeddings))
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
    loss, _ = objective(Fixed(), hand_batch())
    loss.backward()
    assert objective.classifier.weight.grad.abs().sum() > 0
    assert set(objective.state_dict()) >= {"classifier.weight", "classifier.bias"}  # checkpointed with the run


def test_a_negative_weight_is_refused():
    with pytest.raises(ValueError, match="weight"):
        _fdsl_pa(weight=-0.1)


def test_fdsl_pa_takes_shuffled_batches_with_a_filter_that_needs_no_classmate(tmp_path):
    config = tiny_config(tmp_path, objective="fdsl_pa", fdsl_pa={"batches": "shuffled", "filter": "diff"})
    assert config.shuffled_batches


def test_an_interrupted_fdsl_pa_run_resumes_its_class_head_to_the_uninterrupted_weights(tiny_table, tmp_path, monkeypatch):
    """The class head is the objective's, not the model's: it must travel in the checkpoint, or a resumed run
    would start the head over from its initial weights and end elsewhere."""
    import fdsml.training.pretrain as pretrain_module

    class Interrupted(CrossEntropyPATripletObjective):
        def forward(self, model, batch, step=0):
            if step == 3:
                raise KeyboardInterrupt("killed after the checkpoint at step 2")
            return super().forward(model, batch, step)

    def config(run_dir):
        return tiny_config(run_dir, objective="fdsl_pa", train={"max_steps": 5, "checkpoint_every": 2})

    build = pretrain_module.build_objective
    with monkeypatch.context() as patched:
        patched.setattr(pretrain_module, "build_objective", lambda c, *sizes: _interrupted(build(c, *sizes), Interrupted))
        with pytest.raises(KeyboardInterrupt):
            pretrain(tiny_table, TINY_SPEC, config(tmp_path / "killed"))
    resumed, history = pretrain(tiny_table, TINY_SPEC, config(tmp_path / "killed"))
    assert history["step"].tolist() == [1, 2, 3, 4, 5]
    uninterrupted, _ = pretrain(tiny_table, TINY_SPEC, config(tmp_path / "straight"))
    for name, tensor in uninterrupted["state_dict"].items():
        torch.testing.assert_close(resumed["state_dict"][name], tensor, rtol=0, atol=0, msg=name)


def _interrupted(objective, cls):
    """``objective`` as an instance of its subclass ``cls`` (same state)."""
    objective.__class__ = cls
    return objective


def test_the_settings_defaults_are_conf_bases_and_their_bounds_are_named():
    """The dataclass's defaults and conf/base's block hold the same tuned recipe; a weight of 0 (cross-entropy alone) and
    plain batches for a filter that needs no class are allowed, the rest refused in full."""
    from fdsml.config import ConfigError, env_parameters
    from fdsml.training.pretrain_objectives.fdsl_pa import FDSLPASettings

    from tests.support import ROOT

    assert FDSLPASettings(**env_parameters(str(ROOT / "conf"), "base")["pretrain"]["fdsl_pa"]) == FDSLPASettings()
    assert FDSLPASettings(weight=0.0, label_smoothing=0.0, batches="shuffled", filter="diff").weight == 0.0
    for changes, message in (
        ({"weight": -1.0}, "weight: must be >= 0 (0: cross-entropy alone), got -1.0"),
        ({"label_smoothing": 1.0}, "label_smoothing: must lie in [0, 1), got 1.0"),
        ({"label_smoothing": -0.1}, "label_smoothing: must lie in [0, 1), got -0.1"),
        ({"batches": "shuffled", "filter": "each"}, "batches: plain shuffled batches hold almost no same-class candidates, so "
         "filter 'each' finds next to no triplet; use class_balanced (P x K batches), or filter all or diff"),
    ):  # fmt: skip
        with pytest.raises(ConfigError) as refused:
            FDSLPASettings(**changes)
        assert str(refused.value) == message
