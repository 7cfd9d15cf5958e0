"""A study: checked before any trial, opened (or resumed) in its storage, run to its budget by Optuna.

Budget: ``tune.budget.n_trials`` counts the trials in the study, whichever run or worker made them:
a worker starts a trial only while the study holds fewer complete, pruned or running ones, so a
second ``kedro run --pipelines=tune`` adds trials up to the total (raise ``n_trials`` for more) and
a killed study resumes where it stopped. Failed trials (a killed worker) never count; a diverged
loss is its parameters' result, so its trial is PRUNED at that step: it counts, and the sampler
learns to avoid its region instead of drawing there again. Two workers checking at the same instant may each start one, so N workers can end up to
N - 1 trials over. ``timeout_s`` bounds this worker's time: no trial starts after it.

On an RDB storage (with its heartbeat) a worker that reaches the budget while other workers' trials
still run waits for them: each ends, or its worker was killed and the heartbeat fails it after the
grace period, and this worker runs its parameters again. So every worker ends on the same finished
study, and a trial lost with its machine is made up by the workers left.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from typing import Any

import optuna
from optuna.storages import fail_stale_trials
from optuna.trial import TrialState

from fdsml.config import ConfigError
from fdsml.seeds import stream
from fdsml.training.pretrain import idle_optimizer_block, parse_pretrain_params
from fdsml.training.retrieval import parse_retrieval_params
from fdsml.tuning.config import TuneConfig
from fdsml.tuning.objective import DIVERGED, PRETRAINED, SET_BY_THE_STUDY, TrialObjective
from fdsml.tuning.space import SearchParameter, joint_value
from fdsml.tuning.storage import fail_trials_of_dead_workers, open_storage, shown, storage_answering

logger = logging.getLogger(__name__)
COUNTED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
PARSERS = {"pretrain": parse_pretrain_params, "retrieval": parse_retrieval_params}


def _check_parameter(objective: TrialObjective, parameter: SearchParameter) -> None:
    """Every extreme of ``parameter`` overlaid on the configuration must parse: a bad value fails now, not at trial 7."""
    if any(key in SET_BY_THE_STUDY or key.startswith(tuple(f"{set_key}." for set_key in SET_BY_THE_STUDY)) for key in parameter.keys):
        raise ConfigError(f"tune.space.{parameter.key}: set by the study itself (run folders, the validation split); not searchable")
    stages = sorted({key.split(".")[0] for key in parameter.keys})
    if "retrieval" in stages and not objective.config.fine_tunes:
        raise ConfigError(f"tune.space.{parameter.key}: the metric {objective.config.metric} runs no fine-tuning; choose a retrieval.* metric")
    for value in parameter.extremes:
        configuration = objective.trial_configuration(0, {parameter.key: value})
        try:
            for stage in stages:
                PARSERS[stage](configuration[stage])
        except ConfigError as error:
            raise ConfigError(f"tune.space.{parameter.key}: {value!r} is refused by the configuration: {error}") from error
    if "pretrain" in stages:
        idle = idle_optimizer_block(parse_pretrain_params(objective.trial_configuration(0, {})["pretrain"]))
        dead = [key for key in parameter.keys if key.startswith(f"{idle}.")]
        if dead:
            used = "pretrain.transformer_optimizer" if idle == "pretrain.optimizer" else "pretrain.optimizer"
            raise ConfigError(
                f"tune.space.{parameter.key}: the runs train with {used} (the backbone's family decides, docs/pretrain.md), "
                f"so {dead[0]} changes nothing; search {used}{dead[0].removeprefix(idle)}"
            )


def check_study(objective: TrialObjective) -> None:
    """Everything a study needs, checked before any trial runs; ConfigError naming the key otherwise."""
    config = objective.config
    for parameter in config.parameters:
        _check_parameter(objective, parameter)
    if config.baseline:
        check_baseline(objective)
    base = objective.trial_configuration(0, {})
    validation = parse_pretrain_params(base["pretrain"]).validation
    if config.pruner.name != "none" or not config.fine_tunes:
        column = objective.pruning_column
        if not validation.enabled or (column == "val_probe_recall_at_1" and validation.probe is None):
            raise ConfigError(
                f"tune.metric: pre-training writes no {column} (pretrain.validation.every: {validation.every}, probe: "
                f"{'none' if validation.probe is None else validation.probe.dataset}); enable pretrain.validation and its probe"
                + (", or set tune.pruner.name: none" if config.fine_tunes else "")
            )
    if config.fine_tunes and not base["retrieval"]["starts"]:
        raise ConfigError(f"tune.metric: {config.metric} scores the start of retrieval.starts with checkpoint: {PRETRAINED}; there is none")


def baseline_values(objective: TrialObjective) -> dict[str, Any]:
    """The configuration's own values of the searched parameters (the untuned run)."""
    values = {}
    for key in (key for parameter in objective.config.parameters for key in parameter.keys):
        node: Any = objective.configuration
        for part in key.split("."):
            node = node[part]
        values[key] = node
    return {parameter.key: joint_value(parameter.key, values) for parameter in objective.config.parameters}


def check_baseline(objective: TrialObjective) -> None:
    """The baseline trial's values must lie in the space (Optuna would record them outside it)."""
    values = baseline_values(objective)
    for parameter in objective.config.parameters:
        value = values[parameter.key]
        if objective.config.sampler.name == "grid":
            inside = value in parameter.grid()
        elif parameter.choices is not None:
            inside = value in parameter.choices
        else:
            inside = isinstance(value, (int, float)) and parameter.low <= value <= parameter.high
        if not inside:
            raise ConfigError(
                f"tune.baseline: the configuration's {parameter.key} ({value!r}) lies outside tune.space.{parameter.key}; "
                "widen the space or set tune.baseline: false"
            )


def make_sampler(config: TuneConfig, trials: int) -> optuna.samplers.BaseSampler:
    """The sampler of the study's next trial, seeded by ``tune.sampler.seed`` and the ``trials`` the study holds.

    A fresh seed per trial: a second run (or a resumed one) draws new parameters instead of
    replaying the first run's, and one worker's study is reproducible. Workers started at the
    same instant see the same count and would draw the same: give them ``seed: null``. The grid
    is the exception: its sampler numbers the combinations in an order drawn from its seed and
    records each trial's number, so every trial and worker must draw the same order (the
    configured seed, or 0), or a combination would run twice and another never.
    """
    settings = config.sampler
    if settings.name == "grid":
        return optuna.samplers.GridSampler({p.key: p.grid() for p in config.parameters}, seed=settings.seed or 0)
    seed = None if settings.seed is None else int(stream(settings.seed, "tuning_sampler", trials).generate_state(1)[0])
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=settings.n_startup_trials)


def make_pruner(config: TuneConfig) -> optuna.pruners.BasePruner:
    settings = config.pruner
    if settings.name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=settings.n_startup_trials, n_warmup_steps=settings.n_warmup_steps)
    if settings.name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=settings.min_resource or "auto", reduction_factor=settings.reduction_factor
        )
    return optuna.pruners.NopPruner()


def load_study(config: TuneConfig) -> optuna.Study:
    """The study in its storage (created when new), with this configuration's sampler and pruner."""
    location = config.location
    heartbeat = config.heartbeat
    study = optuna.create_study(
        storage=open_storage(location, heartbeat.interval_s, heartbeat.grace_s, retry_stale=True),
        study_name=config.study,
        direction="maximize",
        sampler=make_sampler(config, 0),
        pruner=make_pruner(config),
        load_if_exists=True,
    )
    recorded = study.user_attrs.get("metric")
    if recorded is None:
        study.set_user_attr("metric", config.metric)
    elif recorded != config.metric:
        raise ConfigError(f"tune.metric: study {config.study!r} in {shown(location)} maximises {recorded}; name a new tune.study for {config.metric}")
    return study


def trials_left(study: optuna.Study, config: TuneConfig) -> int | None:
    """Trials this worker may still start (None: no count bounds it)."""
    limits = [config.budget.n_trials] if config.budget.n_trials is not None else []
    if config.sampler.name == "grid":
        limits.append(math.prod(len(p.grid()) for p in config.parameters))
    if not limits:
        return None
    return min(limits) - len(study.get_trials(deepcopy=False, states=COUNTED))


def run_study(objective: TrialObjective) -> optuna.Study:
    """Check, open and run the study to its budget; the study (every worker's trials)."""
    config = objective.config
    check_study(objective)
    study = load_study(config)
    with storage_answering(config.location):
        failed = fail_trials_of_dead_workers(study)
        if failed:
            logger.warning("Trials %s of study %s were left running by a worker that ended: marked failed", failed, config.study)
        if config.baseline:  # once per study (two workers starting at the same instant may both enqueue it)
            study.enqueue_trial(baseline_values(objective), user_attrs={"baseline": True}, skip_if_exists=True)
        run_to_budget(study, objective)
        finish_pruned(study, objective)
    return study


def run_to_budget(study: optuna.Study, objective: TrialObjective) -> None:
    """Trials until the study holds its budget (and no other worker's trial still runs), or this worker's time is up."""
    config = objective.config
    deadline = time.monotonic() + config.budget.timeout_s if config.budget.timeout_s else None
    while deadline is None or time.monotonic() < deadline:
        left = trials_left(study, config)
        if left is not None and left <= 0:
            if not wait_for_other_workers(study, config):
                return
            continue
        study.sampler = make_sampler(config, len(study.get_trials(deepcopy=False)))
        study.optimize(objective, n_trials=1)


def wait_for_other_workers(study: optuna.Study, config: TuneConfig) -> bool:
    """Wait one heartbeat while other workers' trials run, failing those gone silent (their parameters queued
    again); False when none runs, or the storage has no heartbeat to tell a killed worker from a slow one."""
    beating = not config.location.startswith("journal:")  # RDB storages: the heartbeat tells a killed worker
    if not beating or not study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        return False
    time.sleep(config.heartbeat.interval_s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        fail_stale_trials(study)
    return True


FINISHED = "finished_pruned_trial_"
"""Study user attribute ``FINISHED<n>``: pruned trial n's metric once run to its end (a finished trial's own are frozen)."""


def finish_pruned(study: optuna.Study, objective: TrialObjective) -> None:
    """Run the ``tune.finish_pruned`` pruned trials with the best last values to their end (resuming their
    checkpoints, no pruning), once each; their metrics go to the study's user attributes."""
    pruned = [trial for trial in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)) if DIVERGED not in trial.user_attrs]
    top = sorted(pruned, key=lambda trial: (-trial.value, trial.number))[: objective.config.finish_pruned]
    for trial in top:
        if f"{FINISHED}{trial.number}" not in study.user_attrs:
            logger.info("Running pruned trial %d to its end: would it have won?", trial.number)
            value, _ = objective.run(trial.number, trial.params)
            study.set_user_attr(f"{FINISHED}{trial.number}", value)
