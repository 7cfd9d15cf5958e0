"""One trial: a real run through the project's code with the trial's parameters overlaid on the configuration.

Pre-training (:func:`fdsml.training.pretrain.pretrain`, with its run folder, run fingerprint,
resume rule and dvclive files) and, when the metric is a fine-tuned one, retrieval fine-tuning
(:func:`fdsml.training.retrieval.compare_starting_points`) of the pre-trained model. Trial ``n``'s
runs live in ``<run_dir>/<study>/trial_<n>/``; its live metrics in ``<live_dir>/<study>/trial_<n>/``.
Every trial reads the validation split (``tune.validation_dataset``), never a test split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from fdsml.config import ConfigError, with_overlay
from fdsml.errors import DivergedError
from fdsml.data.holdout import HoldoutSplit
from fdsml.families import FamilySpec
from fdsml.training.pretrain import parse_pretrain_params, pretrain
from fdsml.training.retrieval import compare_starting_points, parse_retrieval_params
from fdsml.tuning.config import TuneConfig
from fdsml.tuning.pruning import ReportingValidation
from fdsml.tuning.space import overlay
from fdsml.tuning.storage import worker_name

PRETRAINED = "pretrained_model"
"""The retrieval start that fine-tunes the pre-training pipeline's model: the one a study scores."""
SET_BY_THE_STUDY = (
    "pretrain.run_dir",
    "pretrain.live_dir",
    "pretrain.validation.probe.dataset",
    "retrieval.run_dir",
    "retrieval.live_dir",
    "retrieval.data.dataset",
    "retrieval.starts",
)
"""Keys each trial sets itself (folders, the validation split): not searchable."""
DIVERGED = "diverged"
"""Trial user attribute: why its loss diverged (the trial is PRUNED at that step, never run to its end)."""


@dataclass(frozen=True)
class TrialInputs:
    """What every trial pre-trains on: the family's table and spec, its held-out split, materialised shards (or None)."""

    table: pd.DataFrame
    spec: FamilySpec
    split: HoldoutSplit
    shards: dict | None = None


class TrialObjective:
    """Optuna's objective: runs trial ``n`` through the project's code and returns its metric (to maximise)."""

    def __init__(self, config: TuneConfig, configuration: dict[str, Any], inputs: TrialInputs):
        self.config, self.configuration, self.inputs = config, configuration, inputs

    @property
    def pruning_column(self) -> str:
        """The validation column reported during pre-training: the metric itself, or the probe for a fine-tuned metric."""
        return "val_probe_recall_at_1" if self.config.fine_tunes else self.config.metric.partition(".")[2]

    def trial_configuration(self, number: int, values: dict[str, Any]) -> dict[str, Any]:
        """The configuration trial ``number`` runs: ``values`` overlaid, its folders, the validation split."""
        config = self.config
        configuration = overlay(self.configuration, values)
        folder = Path(config.run_dir) / config.study / f"trial_{number}"
        live = Path(config.live_dir) / config.study / f"trial_{number}" if config.live_dir else None
        study_sets = {"pretrain.run_dir": str(folder / "pretrain"), "pretrain.live_dir": str(live / "pretrain") if live else None}
        if (configuration["pretrain"].get("validation") or {}).get("probe"):
            study_sets["pretrain.validation.probe.dataset"] = config.validation_dataset
        if config.fine_tunes:
            starts = [start for start in configuration["retrieval"].get("starts", []) if start.get("checkpoint") == PRETRAINED]
            study_sets |= {
                "retrieval.starts": starts[:1],
                "retrieval.data.dataset": config.validation_dataset,
                "retrieval.run_dir": str(folder / "retrieval"),
                "retrieval.live_dir": str(live / "retrieval") if live else None,
            }
        return with_overlay(configuration, study_sets)

    def __call__(self, trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", worker_name())
        values = {parameter.key: parameter.suggest(trial) for parameter in self.config.parameters}
        trial.set_user_attr("run_dir", str(Path(self.config.run_dir) / self.config.study / f"trial_{trial.number}"))
        try:
            value, steps = self.run(trial.number, values, trial)
        except DivergedError as error:  # its parameters' result, not a fault: it counts, and the sampler learns from it
            trial.set_user_attr(DIVERGED, str(error))
            raise optuna.TrialPruned(f"diverged: {error}") from error
        trial.set_user_attr("steps", steps)
        return value

    def run(self, number: int, values: dict[str, Any], trial: optuna.Trial | None = None) -> tuple[float, int]:
        """Trial ``number``'s runs with ``values``: its metric and its pre-training steps. With ``trial``, the
        validation's values are reported to it (and may prune it); without, the run goes to its end (resuming
        a pruned trial's checkpoint)."""
        configuration = self.trial_configuration(number, values)
        inputs = self.inputs
        payload, history = pretrain(
            inputs.table,
            inputs.spec,
            parse_pretrain_params(configuration["pretrain"]),
            shards=inputs.shards,
            split=inputs.split,
            watch_validation=None if trial is None else (lambda validation: ReportingValidation(validation, trial, self.pruning_column)),
        )
        steps = int(payload["metadata"]["steps"])
        if not self.config.fine_tunes:
            return final_value(history, self.pruning_column), steps
        metrics, _, _ = compare_starting_points(parse_retrieval_params(configuration["retrieval"]), payload)
        (scores,) = metrics.values()
        return float(scores["mean"][self.config.metric.partition(".")[2]]), steps


def final_value(history: pd.DataFrame, column: str) -> float:
    """``column`` at the run's last step: the value a finished trial is scored by."""
    last = history.loc[history["step"] == history["step"].max(), column] if column in history else pd.Series(dtype=float)
    value = float(last.iloc[-1]) if len(last) else math.nan
    if not math.isfinite(value):
        raise ConfigError(f"tune.metric: the pre-training history has no {column} at its last step; check pretrain.validation")
    return value
