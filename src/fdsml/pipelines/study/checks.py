"""The study file's check before any work: its steps, metrics, arms and every arm's parameters, each refusal naming the file.

An arm's overlay is checked as a run's parameters are (:mod:`fdsml.pipelines.run_checks`): a section
that is none of the project's, and a key or value its section's parser refuses (naming the closest
known key), stop the run before the first unit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fdsml.config import ConfigError, closest_key
from fdsml.pipelines.run_checks import unknown_sections
from fdsml.config import env_parameters
from fdsml.tuning.study_runner import StudySettings, parse_study_settings, plan_units, step_metrics, study_path, trials
from fdsml.tuning.study_file import StudyDefinition, arm_steps, parameter_overlay, parameter_overlay_keys, read_study, scaled, tables
from fdsml.tuning.study_steps import STEPS


def _unknown(kind: str, name: str, known) -> str:
    guess = closest_key(name, known)
    return f"{kind} {name!r} is unknown{f' (did you mean {guess}?)' if guess else ''}; known: {', '.join(sorted(known))}"


def check_steps_and_metrics(study: StudyDefinition, where: str) -> None:
    """Every step an arm runs is known, every metric of the tables and the figure is one of the steps' metrics, and
    a proportion without its own count of trials has the table's ``trials``. A named step runs a step of
    :data:`STEPS` under a name none of them has."""
    for name, named in study.named_steps.items():
        if name in STEPS:
            raise ConfigError(f"{where}: named_steps.{name}: {name!r} is a step already; give the named step a name of its own")
        if named.step not in STEPS:
            raise ConfigError(f"{where}: named_steps.{name}.step: {_unknown('step', named.step, STEPS)}")
    for arm in study.arms:
        for step in arm_steps(study, arm):
            if step not in STEPS and step not in study.named_steps:
                raise ConfigError(f"{where}: arms.{arm}: {_unknown('step', step, [*STEPS, *study.named_steps])}")
    yielded = {metric for arm in study.arms for step in arm_steps(study, arm) for metric in step_metrics(study, step)}
    for name, table in tables(study).items():
        gain = (table.gain.start, table.gain.end) if table.gain else ()
        asked = {"metrics": table.metrics, "differences": table.differences, "every_combination": table.every_combination, "gain": gain, "intervals": table.intervals}
        for key, metrics in asked.items():
            for metric in (metric for metric in metrics if metric not in yielded):
                raise ConfigError(f"{where}: {name}.{key}: {_unknown('metric', metric, yielded)}")
        uncounted = [metric for metric in table.intervals if f"{metric}.trials" not in yielded]
        if (table.gain or uncounted) and table.trials is None:
            raise ConfigError(f"{where}: {name}.trials: gain and intervals need the parameter giving each proportion's trials (e.g. trials: validate_descriptor.n_triplets)")
    for metric in (metric for metric in study.figure.metrics if metric not in yielded) if study.figure else ():
        raise ConfigError(f"{where}: figure.metrics: {_unknown('metric', metric, yielded)}")
    if study.figure is not None and not any(study.figure.x in parameter_overlay_keys(overlay) for overlay in study.arms.values()):
        raise ConfigError(f"{where}: figure.x: no arm sets {study.figure.x!r}; the x axis is a dotted key of the arms' overlays")


def check_study(study: StudyDefinition, settings: StudySettings) -> None:
    """Refuse, naming the file, the arm and the key, a study whose arms would not run."""
    where = str(study_path(settings))
    check_steps_and_metrics(study, where)
    for arm, overlay in {"(shared overlay)": study.overlay, **study.arms}.items():
        problems = unknown_sections(parameter_overlay(overlay))
        if problems:
            raise ConfigError(f"{where}: arms.{arm}: {problems[0][1]}" if arm in study.arms else f"{where}: overlay: {problems[0][1]}")
    base = env_parameters(settings.conf_source, study.env)
    chosen, _ = scaled(study, settings.scale)
    for arm in chosen.arms:
        try:
            plan_units(replace(study, arms={arm: study.arms[arm]}), replace(settings, scale=None), base)
        except ConfigError as error:
            raise ConfigError(f"{where}: arms.{arm}: {error}") from error
    plans = plan_units(study, settings, base)  # the scale's overlay on every arm
    for key, plan in ((table.trials, plan) for table in tables(study).values() if table.trials for plan in plans.values()):
        try:
            trials(plan.parameters, key)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from error


def check_study_params(params: dict[str, Any]) -> StudySettings:
    """``params:study``, and the study file it names checked in full (nothing to check without a name)."""
    settings = parse_study_settings(params)
    if settings.name is not None:
        check_study(read_study(study_path(settings)), settings)
    return settings
