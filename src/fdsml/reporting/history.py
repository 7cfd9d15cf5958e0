"""How a training history reads at a glance: the mean loss over the first and the last tenth of the steps."""

from __future__ import annotations

import pandas as pd


def loss_trend(history: pd.DataFrame) -> tuple[float, float]:
    """(mean loss over the first tenth of the steps, over the last tenth); a tenth is at least one step."""
    tenth = max(len(history) // 10, 1)
    return float(history["loss"].iloc[:tenth].mean()), float(history["loss"].iloc[-tenth:].mean())
