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
    # a run that logged no loss at all (a history without the column) reads as one too short to show a trend
    unlogged = likely_fault(pd.DataFrame({"step": [1, 2]}), _plan(2), 2.0, task="classification", searched=False)
    assert unlogged == "too few steps (2 steps of 10 images: too few to read a trend); raise classification.train.epochs or max_steps"


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

    with pytest.raises(ConfigError, match=f"^noise_ses: must be positive, got {noise_ses}$"):
        BaselineSettings(noise_ses=noise_ses)
    with pytest.raises(ConfigError, match="^pixel_size: must be positive, got 0$"):
        BaselineSettings(pixel_size=0)


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


def test_a_rate_key_names_the_start_by_its_place_in_the_tasks_list_or_the_tasks_own_rate():
    from fdsml.models.starting_points import StartingPoint
    from fdsml.training.comparison import rate_key

    starts = (StartingPoint("scratch", None), StartingPoint("a", "a.pt", base_lr=1e-3), StartingPoint("b", "b.pt", base_lr=3e-4))
    assert [rate_key("retrieval", "starts", starts, start) for start in starts] == [
        "retrieval.optimizer.base_lr",
        "retrieval.starts[1].base_lr",
        "retrieval.starts[2].base_lr",
    ]


def test_the_rates_note_names_each_fixed_rate_by_its_key_and_how_the_search_chooses_the_rest():
    from fdsml.training.classification import parse_classification_params, rate_source
    from fdsml.training.comparison import is_searched, rates_note

    starts = [{"name": "scratch"}, {"name": "fdsml", "checkpoint": "pretrained_model", "base_lr": 3e-4}, {"name": "own", "checkpoint": "own.pt"}]
    fixed = parse_classification_params({"starting_points": starts})
    note = lambda config: rates_note(config, config.starting_points, rate_source, task="classification", by="top-1", on="the training images")
    assert note(fixed) == (
        "rates: scratch 0.001 (classification.optimizer.base_lr); fdsml 0.0003 (classification.starting_points[1].base_lr); "
        "own 0.001 (classification.optimizer.base_lr)"
    )
    searching = parse_classification_params({"starting_points": starts, "rate_search": {"rates": [1e-4, 1e-3], "validation_fraction": 0.25}})
    assert [is_searched(searching, start) for start in searching.starting_points] == [True, False, True]
    assert not any(is_searched(fixed, start) for start in fixed.starting_points)
    assert note(searching) == (
        "rates: fdsml 0.0003 (classification.starting_points[1].base_lr); scratch, own chosen by top-1 from 0.0001, 0.001 on "
        "25% of the training images held out (classification.rate_search: 2 more fine-tunings a start)"
    )


def test_the_rate_record_and_its_cell():
    from fdsml.training.comparison import rate_cell, rate_record
    from fdsml.training.rate_search import RateChoice

    plan = _plan()
    assert rate_record(3e-4, plan, "retrieval.optimizer.base_lr") == {"base_lr": 3e-4, "learning_rate": plan.learning_rate, "source": "retrieval.optimizer.base_lr"}
    choice = RateChoice(1e-3, "map@r", {1e-3: {"map@r": 0.5}}, "20 % of the training classes", 12.0)
    assert rate_record(1e-3, plan, "chosen on validation", choice)["search"] == choice.as_dict()
    assert rate_cell({"base_lr": 3e-4, "source": "chosen on validation"}) == "0.0003 (chosen on validation)"
    assert rate_cell({"base_lr": 0.00123456, "source": "k"}) == "0.00123 (k)"


def test_the_difference_table_the_rate_search_table_and_the_verdicts_under_them():
    from fdsml.training.comparison import FROZEN, PIXELS, difference_rows, rate_search_rows, verdict_paragraphs, versus_record

    versus = versus_record({PIXELS: (0.3, Difference(0.125, 0.025)), FROZEN: (0.35, Difference(-0.0625, 0.0125))}, "recall@1")
    assert versus[PIXELS] == {"metric": "recall@1", "baseline": 0.3, "difference": 0.125, "se": 0.025}
    search = {"rates": {"0.0003": {"map@r": 0.25}, "0.001": {"map@r": 0.375}}, "chosen": 1e-3, "metric": "map@r",
              "validation": "20 % of the training classes", "seconds": 61.4}  # fmt: skip
    results = {
        "fdsml": {"versus": versus, "rate": {"search": search}, "verdict": "fine-tuning did not help: fdsml fine-tuned reaches x"},
        "scratch": {"versus": versus, "rate": {"base_lr": 1e-3}},
        "own": {"versus": versus, "rate": {"search": {**search, "rates": {"0.003": {"map@r": 0.5}}, "chosen": 3e-3}}, "verdict": None},
    }
    assert difference_rows(results) == [
        "| start | - raw pixels | - its frozen trunk |", "|---|---:|---:|",
        "| fdsml | +12.5 ± 2.5 | -6.2 ± 1.2 |", "| scratch | +12.5 ± 2.5 | -6.2 ± 1.2 |", "| own | +12.5 ± 2.5 | -6.2 ± 1.2 |",
    ]  # fmt: skip
    assert rate_search_rows(results, "the test classes") == [
        "",
        "Rates chosen on validation (map@r, %, on 20 % of the training classes; never the test classes):",
        "",
        "| start | 0.0003 | 0.001 | 0.003 | chosen | search seconds |",
        "|---|---:|---:|---:|---:|---:|",
        "| fdsml | 25.0 | 37.5 |  | 0.001 | 61 |",
        "| own |  |  | 50.0 | 0.003 | 61 |",
    ]
    assert rate_search_rows({"scratch": results["scratch"]}, "the test classes") == []
    assert verdict_paragraphs(results) == "\nFine-tuning did not help: fdsml fine-tuned reaches x.\n"
