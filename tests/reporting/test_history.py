import numpy as np
import pandas as pd

from fdsml.reporting.history import describe_loss_trend, loss_trend, measured_change, validation_cost, validation_metrics
from fdsml.reporting.report import pretrain_section


def test_the_trend_averages_the_first_and_last_tenth_of_the_steps():
    history = pd.DataFrame({"loss": [10.0] * 10 + [5.0] * 80 + [1.0] * 10})
    assert loss_trend(history) == (10.0, 1.0)


def test_a_short_history_compares_its_first_and_last_step():
    assert loss_trend(pd.DataFrame({"loss": [4.0, 3.0, 2.0]})) == (4.0, 2.0)


def _validated_history():
    nan = float("nan")
    return pd.DataFrame(
        {
            "step": [1, 2, 3, 4],
            "loss": [1.0, 0.9, 0.8, 0.7],
            "data_s": [0.5] * 4,
            "step_s": [1.5] * 4,
            "val_unseen_agreement_all": [nan, 0.55, nan, 0.7],
            "val_unseen_region_top1": [nan] * 4,  # a PA-Triplet run: never measured
            "validation_s": [nan, 0.4, nan, 0.4],
        }
    )


def test_validation_metrics_are_the_measured_ones_at_the_steps_they_ran():
    metrics = validation_metrics(_validated_history())
    assert metrics.index.tolist() == [2, 4] and metrics.columns.tolist() == ["val_unseen_agreement_all"]
    assert validation_metrics(pd.DataFrame({"step": [1], "loss": [1.0]})).empty


def test_the_cost_is_validation_time_over_training_step_time():
    assert validation_cost(_validated_history()) == 0.8 / 8.0
    assert validation_cost(pd.DataFrame({"loss": [1.0]})) is None


def test_the_report_shows_the_first_and_last_validation_and_the_cost():
    text = pretrain_section(_validated_history().assign(images_per_s=10.0))
    assert "| metric | step 2 | step 4 |" in text and "| unseen_agreement_all | 0.550 | 0.700 |" in text
    assert "| unseen_region_top1 |" not in text and "10.0 % of the training steps' time" in text



def test_measured_change_gives_the_first_and_last_validation_with_their_noise_and_the_change_in_standard_errors():
    nan = np.nan
    history = pd.DataFrame(
        {
            "step": [0, 1, 2, 3],
            "loss": [nan, 0.9, 0.8, 0.7],
            "val_probe_recall_at_1": [0.2, nan, 0.3, 0.45],
            "se_val_probe_recall_at_1": [0.03, nan, 0.035, 0.04],
        }
    )
    # change 0.25, its standard error sqrt(0.03^2 + 0.04^2) = 0.05: five standard errors
    assert measured_change(history, "val_probe_recall_at_1") == (
        "0.2000 ± 0.0300 at step 0 -> 0.4500 ± 0.0400 at step 3: +0.2500 ± 0.0500 (5.0 standard errors)"
    )
    unmeasured = history.drop(columns="se_val_probe_recall_at_1")
    assert measured_change(unmeasured, "val_probe_recall_at_1") == "0.2000 at step 0 -> 0.4500 at step 3"
    assert measured_change(history.drop(columns="val_probe_recall_at_1"), "val_probe_recall_at_1") is None


def test_the_validation_rows_without_a_loss_never_make_the_trend_nan():
    # step 0 is the held-out validation's row alone: no loss; the trend starts at the first trained step
    nan = float("nan")
    history = pd.DataFrame({"loss": [nan, 4.0, 3.0, 2.0], "step": [0, 1, 2, 3]})
    assert loss_trend(history) == (4.0, 2.0)
    assert describe_loss_trend(history) == "loss 4.0000 (first tenth) -> 2.0000 (last tenth) over 3 steps"
    assert "nan" not in describe_loss_trend(pd.DataFrame({"loss": [nan]}))
