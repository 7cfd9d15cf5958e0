"""``pa_triplet``: the miner's order and the graded margin, by hand."""

import pytest
import torch

from fdsml.losses.pa_triplet import graded_margins, mine_batch_triplets
from fdsml.seeds import step_seed
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective
from fdsml.training.pretrain_objectives.recipe import objective_recipe

from .tiny_batch import LABELS, MARGIN, PSI, SAME_TRIPLETS, Fixed, hand_batch, hinge


def test_the_miner_orders_same_triplets_by_the_descriptor_as_read_by_hand():
    mined = mine_batch_triplets(LABELS, PSI, "same")
    assert sorted(zip(*(t.tolist() for t in mined))) == SAME_TRIPLETS


def test_graded_margins_are_the_margin_times_the_relative_descriptor_gap():
    triplets = tuple(torch.tensor(column) for column in zip(*SAME_TRIPLETS))
    # (d_an - d_ap) / max(d_ap, d_an), read off PSI: anchor 0: (3 - 1) / 3; anchor 1: (2 - 1) / 2; anchor 2: (3 - 2) / 3; ...
    gaps = [2 / 3, 1 / 2, 1 / 3, 1 / 3, 1 / 2, 2 / 3]
    torch.testing.assert_close(graded_margins(PSI, triplets, 0.6), torch.tensor([0.6 * g for g in gaps]))
    tie = graded_margins(torch.zeros(3, 1), (torch.tensor([0]), torch.tensor([1]), torch.tensor([2])), 0.6)
    assert tie.tolist() == [0.0]  # equal descriptors: no gap, no margin


def test_graded_margin_enters_the_loss_per_triplet():
    objective = PATripletObjective("same", margin=MARGIN, normalize_embeddings=False, graded_margin=True)
    loss, _ = objective(Fixed(), hand_batch())
    gaps = [2 / 3, 1 / 2, 1 / 3, 1 / 3, 1 / 2, 2 / 3]
    expected = sum(hinge(*t, margin=MARGIN * g) for t, g in zip(SAME_TRIPLETS, gaps)) / 6
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_the_recipe_builds_its_settings_objective_under_the_runs_seed_and_records_filter_and_mode():
    recipe = objective_recipe("pa_triplet")
    settings = recipe.settings(filter="diff", mode="explicit", max_triplets=5)
    objective = recipe.build(settings, num_classes=3, embedding_dim=2, seed=13)
    assert (objective.filter_name, objective.mode, objective.max_triplets, objective.seed) == ("diff", "explicit", 5, 13)
    assert recipe.describe(settings) == {"filter": "diff", "mode": "explicit"}


def test_batch_mode_mines_its_filters_triplets_in_the_batch_and_explicit_mode_brings_its_own():
    recipe = objective_recipe("pa_triplet")
    batch = recipe.settings(filter="same")
    assert recipe.batch_triplets(batch) == ("same", batch)
    assert recipe.batch_triplets(recipe.settings(filter="same", mode="explicit")) is None


def test_the_loss_options_carry_near_ties_and_the_graded_margin():
    options = objective_recipe("pa_triplet").settings(min_relative_gap=0.2, graded_margin=True, max_triplets=9).loss_options()
    assert options == {"margin": 0.2, "normalize_embeddings": True, "reducer": "mean", "max_triplets": 9, "min_relative_gap": 0.2, "graded_margin": True}


def test_pa_triplet_draws_each_steps_subset_of_triplets():
    objective = PATripletObjective("same", margin=MARGIN, normalize_embeddings=False, max_triplets=2)
    losses = [objective(Fixed(), hand_batch(), step)[0].item() for step in range(6)]
    assert losses[3] == pytest.approx(objective.term(hand_batch()["image"], hand_batch(), 3)[0].item())
    assert len(set(losses)) > 1


def test_near_ties_are_left_out_of_the_loss_but_every_mined_triplet_is_scored():
    """At a minimum relative gap of 0.4 the two triplets whose descriptor gap is 1/3 ((2, 1, 0) and (3, 4, 5)) leave the
    loss; the triplet accuracy still reads all six, of which the embedding orders four (not (2, 1, 0), not (4, 5, 3))."""
    objective = PATripletObjective("same", margin=MARGIN, normalize_embeddings=False, min_relative_gap=0.4)
    loss, parts = objective(Fixed(), hand_batch())
    kept = [(0, 1, 2), (1, 0, 2), (4, 5, 3), (5, 4, 3)]
    assert loss.item() == pytest.approx(sum(hinge(*t) for t in kept) / 4, rel=1e-6)
    assert parts["triplets"] == 4 and parts["triplet_accuracy_same"].item() == pytest.approx(4 / 6)


def test_the_triplet_subset_is_drawn_from_a_stream_of_its_own_not_the_steps_global_one():
    """The loop seeds torch's global generator with the step's seed (dropout, drop-path); the subset's generator must not
    replay those numbers, and it is the same for the same step and another for the next."""
    objective = PATripletObjective("same", max_triplets=2, seed=3)
    seeds = [objective.subsampling(LABELS, step).initial_seed() for step in (5, 5, 6)]
    assert seeds[0] == seeds[1] != seeds[2]
    assert seeds[0] not in (step_seed(3, 5), step_seed(3, 5, 0))


def test_the_objectives_defaults_are_the_settings_defaults_and_an_unknown_mode_is_named():
    """Built bare or from default settings, the objective is the same: margin 0.2 on normalised embeddings, seed 0."""
    recipe = objective_recipe("pa_triplet")
    built, bare = recipe.build(recipe.settings(), num_classes=2, embedding_dim=2, seed=0), PATripletObjective("same")
    for objective in (built, bare):
        assert (objective.loss.margin, objective.loss.distance.normalize_embeddings, objective.seed) == (0.2, True, 0)
    with pytest.raises(ValueError, match="^unknown triplet mode 'pairs'; choose one of batch, explicit$"):
        PATripletObjective("same", mode="pairs")


def test_the_triplet_settings_bounds_a_margin_of_zero_and_no_gap_allowed_and_their_refusals_named():
    from fdsml.config import ConfigError
    from fdsml.training.pretrain_objectives.triplet_settings import DescriptorTripletSettings

    settings = DescriptorTripletSettings(margin=0.0, min_relative_gap=0.0, max_triplets=1)
    assert settings.loss_options() == {"margin": 0.0, "normalize_embeddings": True, "reducer": "mean", "max_triplets": 1, "min_relative_gap": 0.0, "graded_margin": False}
    for changes, message in (
        ({"margin": -0.5}, "margin: must be >= 0, got -0.5"),
        ({"max_triplets": 0}, "max_triplets: must be positive, got 0"),
        ({"min_relative_gap": -0.1}, "min_relative_gap: must lie in [0, 1) (0 keeps every triplet), got -0.1"),
        ({"min_relative_gap": 1.0}, "min_relative_gap: must lie in [0, 1) (0 keeps every triplet), got 1.0"),
    ):
        with pytest.raises(ConfigError) as refused:
            DescriptorTripletSettings(**changes)
        assert str(refused.value) == message
