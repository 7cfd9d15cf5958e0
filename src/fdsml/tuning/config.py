"""``params:tune``: the search space, the metric, the budget, the sampler, the pruner and the storage of a study."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fdsml.config import ConfigError, closest_key, parse, require_name, require_positive, require_seed
from fdsml.evaluation.pretrain_validation import METRICS as PRETRAIN_METRICS
from fdsml.tuning.space import SearchParameter, parse_space
from fdsml.tuning.storage import storage_location

RETRIEVAL_METRICS = ("recall@1", "recall@2", "recall@4", "recall@8", "map@r")
"""Fine-tuned retrieval metrics on the validation split a study may maximise (``retrieval.<name>``)."""
TEST_DATASETS = ("omniglot",)
"""Datasets whose test part would be read: a study must never choose settings on them."""


@dataclass(frozen=True)
class BudgetSettings:
    """``tune.budget``: trials in the study in all (complete or pruned, any worker) and this worker's wall time."""

    n_trials: int | None = 12
    timeout_s: float | None = None

    def __post_init__(self):
        if self.n_trials is None and self.timeout_s is None:
            raise ConfigError("tune.budget: give n_trials, timeout_s or both; with neither a study never ends")
        for key in ("n_trials", "timeout_s"):
            if getattr(self, key) is not None:
                require_positive(f"tune.budget.{key}", getattr(self, key))


@dataclass(frozen=True)
class SamplerSettings:
    """``tune.sampler``: Optuna's TPE (seeded), or its grid over every combination of the choices."""

    name: Literal["tpe", "grid"] = "tpe"
    seed: int | None = 0  # None: each worker draws its own (several workers started at once)
    n_startup_trials: int = 5  # TPE: random trials before the model of good and bad ones

    def __post_init__(self):
        if self.seed is not None:
            require_seed("tune.sampler.seed", self.seed)
        require_positive("tune.sampler.n_startup_trials", self.n_startup_trials)


@dataclass(frozen=True)
class PrunerSettings:
    """``tune.pruner``: Optuna's median or successive-halving pruner over the validation's values, or none."""

    name: Literal["median", "successive_halving", "none"] = "median"
    n_startup_trials: int = 3  # median: trials that finish before any is pruned
    n_warmup_steps: int = 0  # median: steps before a trial may be pruned
    min_resource: int | None = None  # successive halving: steps of the first rung (None: Optuna's "auto")
    reduction_factor: int = 3  # successive halving


@dataclass(frozen=True)
class HeartbeatSettings:
    """``tune.heartbeat`` (RDB storages): a running trial beats every ``interval_s``; one silent for ``grace_s`` (its
    worker killed, on any machine) is failed and its parameters run again by a worker of the study."""

    interval_s: int = 60
    grace_s: int = 180

    def __post_init__(self):
        require_positive("tune.heartbeat.interval_s", self.interval_s)
        if self.grace_s <= self.interval_s:
            raise ConfigError(
                f"tune.heartbeat.grace_s: {self.grace_s} must exceed interval_s ({self.interval_s}), or a live worker's trial "
                "would be failed between two beats"
            )


@dataclass(frozen=True)
class TuneArm:
    """One arm of ``tune.arms`` (conf/fair's fair comparison): the pretrain keys its trials keep, its own search space."""

    method: str  # its recipe's name in conf/fair/tuned_recipes*.yml, which the study files read
    pretrain: dict[str, Any] = field(default_factory=dict)
    space: tuple[Any, ...] = ()


@dataclass(frozen=True)
class TuneConfig:
    """``params:tune``."""

    study: str = "pretrain"
    storage: str | None = None  # None: SQLite file <storage_dir>/<study>.db
    metric: str = "pretrain.val_probe_recall_at_1"
    validation_dataset: str = "omniglot_validation"  # the probe's and the fine-tuning's dataset in every trial
    baseline: bool = True  # the configuration's own values as the study's first trial: what tuning is measured against
    space: tuple[Any, ...] = ()  # [{key: pretrain.optimizer.base_lr, low: 0.05, high: 2.0, log: true}, ...]
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    sampler: SamplerSettings = field(default_factory=SamplerSettings)
    pruner: PrunerSettings = field(default_factory=PrunerSettings)
    heartbeat: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    finish_pruned: int = 0  # after the budget, run the best this many pruned trials to their end: did pruning stop a winner?
    storage_dir: str = "data/07_model_output/tune"
    run_dir: str = "data/06_models/tune"  # trial n's runs: <run_dir>/<study>/trial_<n>/
    live_dir: str | None = "data/08_reporting/live/tune"
    arm: str | None = None  # one of arms: the study <study>_<arm> over space + the arm's space, its pretrain keys kept
    arms: dict[str, TuneArm] = field(default_factory=dict)

    def __post_init__(self):
        require_name("tune.study", self.study)
        for arm in self.arms:
            require_name(f"tune.arms.{arm}", arm)  # an arm's study is <study>_<arm>
        if self.validation_dataset in TEST_DATASETS:
            raise ConfigError(
                f"tune.validation_dataset: {self.validation_dataset!r} is a test split; choose settings on a validation "
                "split (omniglot_validation)"
            )
        stage, _, name = self.metric.partition(".")
        if (stage, name) not in {("pretrain", m) for m in PRETRAIN_METRICS} | {("retrieval", m) for m in RETRIEVAL_METRICS}:
            raise ConfigError(
                f"tune.metric: no selected pipeline writes {self.metric!r}; choose pretrain.<{'|'.join(PRETRAIN_METRICS)}> "
                f"or retrieval.<{'|'.join(RETRIEVAL_METRICS)}>"
            )
        if not self.space:
            raise ConfigError("tune.space: empty; give at least one pretrain.* or retrieval.* parameter to search")
        for arm in self.arms.values():
            parse_space([*self.space, *arm.space], grid=False)  # ranges and choices: ConfigError naming tune.space.<key>
        if self.arm is not None and self.arm not in self.arms:
            guess = closest_key(self.arm, self.arms)
            raise ConfigError(
                f"tune.arm: {self.arm!r} is not one of tune.arms{f' (did you mean {guess}?)' if guess else ''}; arms: {', '.join(self.arms) or 'none'}"
            )

    @property
    def arm_pretrain(self) -> dict[str, Any]:
        """The pretrain keys every trial of the arm keeps (none without an arm)."""
        return dict(self.arms[self.arm].pretrain) if self.arm else {}

    @property
    def parameters(self) -> tuple[SearchParameter, ...]:
        """The searched parameters: ``space``, and the arm's own after it."""
        space = (*self.space, *self.arms[self.arm].space) if self.arm else self.space
        return parse_space(space, grid=self.sampler.name == "grid")

    @property
    def location(self) -> str:
        """The study's storage URL or journal location (``storage: null``: its SQLite file)."""
        return storage_location(self.storage, self.storage_dir, self.study)

    @property
    def fine_tunes(self) -> bool:
        """Whether each trial fine-tunes on retrieval after pre-training (the metric is retrieval's)."""
        return self.metric.startswith("retrieval.")


def parse_tune_params(params: dict[str, Any]) -> TuneConfig:
    """Validate ``params:tune`` on its own (its space's keys are checked against the configuration by the study).

    With ``tune.arm``, the study is the arm's: named ``<study>_<arm>``, over the shared space and the arm's."""
    config = parse(TuneConfig, params, "tune")
    if config.arm is not None:
        config = replace(config, study=f"{config.study}_{config.arm}")
    config.parameters  # ranges and choices: ConfigError naming tune.space.<key>
    return config
