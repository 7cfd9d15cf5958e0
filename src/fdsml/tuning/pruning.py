"""Pruning by the held-out signal: the pre-training validation's values become the trial's intermediate values.

:class:`ReportingValidation` wraps the loop's validation (:class:`fdsml.training.loop.Validation`)
without changing it: every time it runs, its ``column`` is reported to the trial at that step,
and the trial stops with :class:`optuna.TrialPruned` when Optuna's pruner says so. The run's
checkpoint stays in its folder, so a pruned trial can be run to the end later. Under DDP only
rank 0 validates, so a trial is one process: trials parallelise across workers, not ranks.
"""

from __future__ import annotations

import math

import optuna
from torch import nn

from fdsml.training.loop import Validation


class ReportingValidation:
    """``validation``, whose ``column`` is reported to ``trial`` each time it runs; prunes when the pruner says so.

    Never at the last step: a trial that trained to its end is complete, and its last value is its result.
    """

    def __init__(self, validation: Validation, trial: optuna.Trial, column: str):
        self.validation, self.trial, self.column = validation, trial, column
        self.total_steps: int | None = None

    def due(self, step: int, total_steps: int) -> bool:
        if self.total_steps is None:
            self.trial.set_user_attr("total_steps", total_steps)  # what pruning saved: steps not run of these
        self.total_steps = total_steps
        return self.validation.due(step, total_steps)

    def __call__(self, model: nn.Module, step: int) -> dict[str, float]:
        metrics = self.validation(model, step)
        value = metrics.get(self.column, math.nan)
        if math.isfinite(value):
            self.trial.report(value, step)
            if step != self.total_steps and self.trial.should_prune():
                raise optuna.TrialPruned(f"{self.column} {value:.4f} at step {step}")
        return metrics
