"""How a training history reads at a glance: the loss trend, and the held-out validation's metrics and cost."""

from __future__ import annotations

import pandas as pd


def loss_trend(history: pd.DataFrame) -> tuple[float, float] | None:
    """(mean loss over the first tenth of the steps, over the last tenth); a tenth is at least one step.

    Only the rows that trained count: the validation's step-0 row has no loss, and a mean over it
    alone would print ``nan``. None when no row has a loss.
    """
    losses = history["loss"].dropna() if "loss" in history else pd.Series(dtype=float)
    if losses.empty:
        return None
    tenth = max(len(losses) // 10, 1)
    return float(losses.iloc[:tenth].mean()), float(losses.iloc[-tenth:].mean())


def describe_loss_trend(history: pd.DataFrame) -> str:
    """The loss trend as every summary prints it: ``loss 1.2345 (first tenth) -> 0.2262 (last tenth) over 36 steps``."""
    trend = loss_trend(history)
    if trend is None:
        return "no training step recorded a loss"
    steps = int(history["loss"].notna().sum())
    return f"loss {trend[0]:.4f} (first tenth) -> {trend[1]:.4f} (last tenth) over {steps} steps"


VALIDATION_PREFIX = "val_"


def validation_metrics(history: pd.DataFrame) -> pd.DataFrame:
    """The held-out validation's metrics (``val_*`` columns it measured) at the steps it ran, indexed by step;
    empty when it never ran."""
    if "validation_s" not in history:
        return pd.DataFrame()
    ran = history[history["validation_s"].notna()]
    return ran.set_index("step")[[c for c in history.columns if c.startswith(VALIDATION_PREFIX)]].dropna(axis=1, how="all")


def probe_trend(history: pd.DataFrame, column: str = "val_probe_recall_at_1") -> tuple[float, float] | None:
    """(the frozen probe's ``column`` at the first validation, normally step 0, at the last); None when never measured."""
    measured = history[column].dropna() if column in history else pd.Series(dtype=float)
    return None if measured.empty else (float(measured.iloc[0]), float(measured.iloc[-1]))


def validation_cost(history: pd.DataFrame) -> float | None:
    """Seconds spent validating over the seconds spent on the training steps (data and step); None when it never ran."""
    if "validation_s" not in history or history["validation_s"].isna().all():
        return None
    return float(history["validation_s"].sum() / (history["data_s"] + history["step_s"]).sum())
