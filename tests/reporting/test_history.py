import pandas as pd

from fdsml.reporting.history import loss_trend


def test_the_trend_averages_the_first_and_last_tenth_of_the_steps():
    history = pd.DataFrame({"loss": [10.0] * 10 + [5.0] * 80 + [1.0] * 10})
    assert loss_trend(history) == (10.0, 1.0)


def test_a_short_history_compares_its_first_and_last_step():
    assert loss_trend(pd.DataFrame({"loss": [4.0, 3.0, 2.0]})) == (4.0, 2.0)
