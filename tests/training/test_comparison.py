"""What a comparison says beside its numbers: spreads only where seeds were run, the knob at fault, the verdict line."""

import numpy as np
import pandas as pd
import pytest

from fdsml.evaluation.noise import Difference
from fdsml.training.comparison import _fell, _tenths, cell, likely_fault, seed_summary, seeds_note, verdict
from fdsml.training.training_plan import PlanKeys, TrainingPlan


def test_one_seed_shows_its_value_alone_and_two_show_mean_and_std():
    one = seed_summary({"0": {"recall@1": 0.125}})
    assert one["std"] is None and cell(one, "recall@1") == "12.5" and seeds_note(1) == "1 seed, no spread measured"
    two = seed_summary({"0": {"recall@1": 0.10}, "1": {"recall@1": 0.15}})
    # the sample standard deviation of 10 and 15: sqrt(12.5) = 3.54
    assert cell(two, "recall@1") == "12.5 ± 3.5" and seeds_note(2) == "mean ± standard deviation over 2 seeds"


def _plan(steps: int = 40) -> TrainingPlan:
    return TrainingPlan(
        step="retrieval/x", world_size=1, images=100, batch_per_replica=10, global_batches_per_epoch=10, batches_per_replica=10,
        epochs=4, total_steps=steps, schedule="constant", warmup_steps=0, learning_rates={"trunk": 1e-3}, triplets_per_batch=None,
        triplet_mining_bytes=None, keys=PlanKeys(batch="retrieval.data.batch_size", warmup="retrieval.optimizer.warmup_steps"),
    )  # fmt: skip


def _history(losses) -> pd.DataFrame:
    return pd.DataFrame({"step": np.arange(1, len(losses) + 1), "loss": losses})


def test_the_knob_at_fault_is_read_off_the_runs_own_losses():
    noise = np.random.default_rng(0).normal(0, 0.01, 40)
    flat = likely_fault(_history(2.0 + noise), _plan(), 2.0, task="retrieval", searched=False)
    assert flat.startswith("the rate (the loss 2.") and "did not fall over 40 steps of 10 images" in flat
    assert "search it (retrieval.rate_search) or set the start's base_lr" in flat
    falling = likely_fault(_history(np.linspace(3.0, 1.0, 40) + noise), _plan(), 2.0, task="retrieval", searched=False)
    assert falling.startswith("too few steps (the loss 2.9") and "raise retrieval.train.epochs or max_steps" in falling
    settled = likely_fault(_history(np.r_[np.linspace(3.0, 1.0, 20), np.ones(20)] + noise), _plan(), 2.0, task="retrieval", searched=True)
    assert settled.startswith("the rate or the batch (the loss") and "more steps would not move it" in settled
    assert "retrieval.data.batch_size" in settled
    assert "widen retrieval.rate_search.rates" in settled  # the search ran: its list held no better rate
    assert likely_fault(_history([1.0, 0.9]), _plan(2), 2.0, task="classification", searched=False).startswith("too few steps")


def test_a_verdict_names_the_baselines_a_start_did_not_beat_and_none_when_it_beat_them_all():
    beaten = {"raw pixels": (0.30, Difference(0.10, 0.02)), "its frozen trunk": (0.35, Difference(0.05, 0.01))}
    assert verdict("fdsml", "Recall@1", 0.40, beaten, 2.0, "the rate", "200 queries") is None
    within = beaten | {"its frozen trunk": (0.38, Difference(0.02, 0.015))}
    line = verdict("fdsml", "Recall@1", 0.40, within, 2.0, "too few steps", "200 queries")
    assert line == (
        "fine-tuning did not help: fdsml fine-tuned reaches Recall@1 40.0 %, against its frozen trunk at 38.0 % (+2.0 ± 1.5): "
        "within 2 standard errors or below (on these 200 queries a gain under 3.0 points cannot be told from noise); most "
        "likely at fault: too few steps"
    )
    below = verdict("scratch", "top-1", 0.2, {"raw pixels": (0.5, Difference(-0.3, 0.05))}, 2.0, "the rate", "40 test images")
    assert "raw pixels at 50.0 % (-30.0 ± 5.0)" in below and "a gain under 10.0 points" in below


@pytest.mark.parametrize("noise_ses", [0.0, -1.0])
def test_the_noise_threshold_must_be_positive(noise_ses):
    from fdsml.config import ConfigError
    from fdsml.training.comparison import BaselineSettings

    with pytest.raises(ConfigError, match="noise_ses"):
        BaselineSettings(noise_ses=noise_ses)


def test_the_losses_are_read_as_their_first_tenth_the_tenth_before_the_last_and_the_last():
    first, previous, last = _tenths(np.arange(100.0))
    assert (first.tolist(), previous.tolist(), last.tolist()) == (list(range(10)), list(range(80, 90)), list(range(90, 100)))
    first, previous, last = _tenths(np.arange(15.0))  # at least two losses a part
    assert (first.tolist(), previous.tolist(), last.tolist()) == ([0, 1], [11, 12], [13, 14])


def test_a_loss_fell_only_by_more_than_so_many_standard_errors_of_the_difference():
    """Hand values: each side's sample variance (n - 1) is 2 over 2 losses, so the difference's SE is sqrt(2)."""
    before, after = np.array([3.0, 5.0]), np.array([0.0, 2.0])  # means 4 and 1: a fall of 3 = 2.12 SE
    assert _fell(before, after, 2.0) and not _fell(before, after, 2.2) and not _fell(after, before, 0.0)
    assert not _fell(np.array([1.0, 3.0]), np.array([0.0, 0.0]), 2.0)  # a fall of exactly 2 SE is not more than 2
