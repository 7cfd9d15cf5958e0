"""How a training history reads at a glance: the loss trend, and the held-out validation's metrics and cost."""

from __future__ import annotations

import pandas as pd

from fdsml.evaluation.pretrain_validation import SE_PREFIX


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


def measured_change(history: pd.DataFrame, column: str) -> str | None:
    """``column`` at the first validation and at the last, each ± its standard error, and the change ± its standard error
    (the two errors combined as independent: conservative, since both score the same items) with how many standard
    errors it is: ``0.036 ± 0.015 at step 0 -> 0.063 ± 0.020 at step 36: +0.027 ± 0.025 (1.1 standard errors)``.
    None when never measured; without the standard errors (a history written before they were), the values alone."""
    rows = history.dropna(subset=[column]) if column in history else history.iloc[:0]
    if rows.empty:
        return None
    first, last = rows.iloc[0], rows.iloc[-1]
    errors = (first.get(SE_PREFIX + column), last.get(SE_PREFIX + column))
    if any(error is None or pd.isna(error) for error in errors):
        return f"{first[column]:.4f} at step {first['step']:.0f} -> {last[column]:.4f} at step {last['step']:.0f}"
    change, error = last[column] - first[column], (errors[0] ** 2 + errors[1] ** 2) ** 0.5
    ratio = f"{abs(change) / error:.1f} standard errors" if error > 0 else "no measured noise"
    return (
        f"{first[column]:.4f} ± {errors[0]:.4f} at step {first['step']:.0f} -> {last[column]:.4f} ± {errors[1]:.4f} at "
        f"step {last['step']:.0f}: {change:+.4f} ± {error:.4f} ({ratio})"
    )


def validation_cost(history: pd.DataFrame) -> float | None:
    """Seconds spent validating over the seconds spent on the training steps (data and step); None when it never ran."""
    if "validation_s" not in history or history["validation_s"].isna().all():
        return None
    return float(history["validation_s"].sum() / (history["data_s"] + history["step_s"]).sum())
