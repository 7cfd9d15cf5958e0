"""What a study leaves: its trials table, the best trial's parameters as a YAML overlay, and Optuna's pictures."""

from __future__ import annotations

import warnings
from typing import Any

import matplotlib.pyplot as plt
import optuna
import pandas as pd
from optuna.trial import TrialState

from fdsml.tuning.objective import DIVERGED
from fdsml.tuning.space import expanded, nested
from fdsml.tuning.study import FINISHED


def trials_table(study: optuna.Study) -> pd.DataFrame:
    """One row per trial: number, state, value, parameters, last reported step, run folder, worker, seconds."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        seconds = (trial.datetime_complete - trial.datetime_start).total_seconds() if trial.datetime_complete and trial.datetime_start else None
        rows.append(
            {
                "number": trial.number,
                "state": trial.state.name,
                "value": trial.value,
                **trial.params,
                "last_step": max(trial.intermediate_values, default=None),
                "value_if_finished": study.user_attrs.get(f"{FINISHED}{trial.number}"),
                "steps": trial.user_attrs.get("steps"),
                "run_dir": trial.user_attrs.get("run_dir"),
                "worker": trial.user_attrs.get("worker"),
                "diverged": DIVERGED in trial.user_attrs,
                "seconds": seconds,
            }
        )
    return pd.DataFrame(rows)


def best_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    """The complete trial with the highest value (the lowest number among ties), or None when none completed."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return max(complete, key=lambda trial: (trial.value, -trial.number), default=None)


def best_overlay(study: optuna.Study) -> dict[str, Any]:
    """The best trial's parameters as a parameters file holds them (``{pretrain: {optimizer: {base_lr: ...}}}``)."""
    best = best_trial(study)
    return nested(best.params) if best is not None else {}


def params_option(study: optuna.Study) -> str:
    """The best trial's parameters as ``kedro run --params=...``."""
    best = best_trial(study)
    return ",".join(f"{key}={value}" for key, value in sorted(expanded(best.params).items())) if best is not None else ""


def study_markdown(study: optuna.Study, table: pd.DataFrame, overlay_path: str) -> str:
    """The study in Markdown: counts per state, the best trial and how to use it, every trial."""
    counts = table["state"].value_counts().to_dict() if len(table) else {}
    best = best_trial(study)
    head = f"# Tuning study `{study.study_name}`\n\nMaximising `{study.user_attrs.get('metric')}`. Trials: " + (
        ", ".join(f"{count} {state.lower()}" for state, count in sorted(counts.items())) or "none"
    ) + ".\n\n"
    if best is None:
        head += "No trial completed yet.\n\n"
    else:
        head += (
            f"Best: trial {best.number}, {best.value:.4f}. Its parameters are in `{overlay_path}`: copy them into "
            f"`conf/<env>/` or pass `kedro run --params={params_option(study)}`.\n\n"
        )
    return head + pruning_summary(study, table) + table.to_markdown(index=False, floatfmt=".4g") + "\n"


def pruning_summary(study: optuna.Study, table: pd.DataFrame) -> str:
    """What pruning saved (pre-training steps not run, of all the trials' planned steps) and, for the pruned
    trials run to their end, whether one would have beaten the best."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    planned = sum(trial.user_attrs.get("total_steps", 0) for trial in trials)
    pruned = [trial for trial in trials if trial.state == TrialState.PRUNED]
    if not pruned:
        return "No trial was pruned.\n\n"
    if not planned:  # trials recorded before their plans were
        return ""
    unrun = sum(trial.user_attrs.get("total_steps", 0) - max(trial.intermediate_values, default=0) for trial in pruned)
    text = f"Pruning stopped {len(pruned)} trials: {unrun} of {planned} planned pre-training steps ({unrun / planned:.0%}) not run.\n\n"
    finished = table.dropna(subset=["value_if_finished"]) if "value_if_finished" in table else table.iloc[:0]
    best = best_trial(study)
    if len(finished) and best is not None:
        beaten = finished[finished["value_if_finished"] > best.value]
        text += f"Run to their end, the pruned trials {', '.join(map(str, finished['number']))} reached " + ", ".join(
            f"{value:.4f}" for value in finished["value_if_finished"]
        ) + (
            f": trial {int(beaten['number'].iloc[0])} would have beaten the best.\n\n" if len(beaten) else f": none beats the best ({best.value:.4f}).\n\n"
        )
    return text


def _figure(draw, study: optuna.Study, title: str):
    """The figure Optuna's matplotlib ``draw`` makes of ``study``, or one saying why there is none yet."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            axes = draw(study)
        except (ValueError, RuntimeError) as error:
            figure, axis = plt.subplots(figsize=(6, 2))
            axis.axis("off")
            axis.text(0.5, 0.5, f"{title}: {error}", ha="center", va="center", wrap=True)
            return figure
    first = axes.flat[0] if hasattr(axes, "flat") else axes
    first.figure.suptitle(title)
    return first.figure


def study_pictures(study: optuna.Study) -> tuple[Any, Any, Any]:
    """Optimisation history, parameter importances, one slice plot per parameter (Optuna's matplotlib, no browser)."""
    from optuna.visualization import matplotlib as drawing

    return (
        _figure(drawing.plot_optimization_history, study, f"{study.study_name}: optimisation history"),
        _figure(drawing.plot_param_importances, study, f"{study.study_name}: parameter importances"),
        _figure(drawing.plot_slice, study, f"{study.study_name}: each parameter against the metric"),
    )
