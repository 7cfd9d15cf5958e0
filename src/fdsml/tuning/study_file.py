"""A study's whole definition, ``conf/studies/<name>.yml``: the arms, the seeds, the steps, the metrics, the table.

A study answers one question by running named arms side by side. Its file says which configuration
environment the arms start from (``env``), a dotted overlay every arm shares (``overlay``), each arm's
own dotted overlay of any pipeline's parameters (``arms``), the seeds as a grid over dotted keys
(``seeds``: every arm runs once per combination), the steps each arm runs (``steps``,
:mod:`fdsml.tuning.study_steps`), the metrics those steps yield and the table to print. Two keys of an
arm's overlay are the study's own rather than parameters: ``study.steps`` (this arm's steps instead of
the study's, e.g. scratch has no pre-training), ``study.recipe`` (a recipe of the study's
``recipes`` file overlaid on ``pretrain`` before the arm's own keys) and ``study.seeded: false`` (an arm whose steps
draw nothing at random, raw pixels or the descriptor, runs once, without the seed grid). A step may run twice on different
parameters: ``named_steps`` names a step with an overlay of its own (a second sweep range), and ``steps``
lists it by that name. docs/studies.md says how to add one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

from fdsml.config import ConfigError, closest_key, parse, with_overlay
from fdsml.tuning.storage import JOURNAL_SUFFIXES

STUDY_KEYS = ("steps", "recipe", "seeded")
"""The keys an arm's overlay may set under ``study.``: they choose what the arm runs, not a parameter."""


@dataclass(frozen=True)
class GainSettings:
    """A column of ``end`` - ``start`` per value of the spread key, and the smallest of those gains over three binomial
    standard errors of ``end`` (sqrt(p(1-p)/n), n the table's ``trials``): above 1, every seed's gain is outside the noise."""

    start: str
    end: str


@dataclass(frozen=True)
class TableSettings:
    """The table: a row per arm, a column per metric (mean ± std over ``spread``), the differences to ``reference``,
    and the statistics a study may add (a spread over every seed combination, a gain, 95 % Wilson intervals)."""

    metrics: tuple[str, ...]
    spread: str | None = None  # the seed key whose values give the spread (the other seed keys are averaged first); null: every combination
    reference: str | None = None  # the arm each row's difference (and its standard error) is to; null: no differences
    differences: tuple[str, ...] = ()  # the metrics whose differences are shown (empty: the first metric)
    paired: bool = False  # differences per spread value (arms sharing their seeds), their mean ± its standard error
    arms: tuple[str, ...] | None = None  # the arms this table shows, in this order (null: every arm, in the file's order)
    percent: bool = True  # metrics shown x 100 (in %), seconds never
    digits: int = 1
    every_combination: tuple[str, ...] = ()  # metrics whose std over every seed combination (nothing averaged first) gets a column
    gain: GainSettings | None = None
    intervals: tuple[str, ...] = ()  # proportions shown with their 95 % Wilson interval (successes and trials pooled over the arm's units)
    trials: str | None = None  # the dotted parameter key holding each proportion's number of trials (gain, intervals); a metric's own ``<metric>.trials`` comes first


@dataclass(frozen=True)
class FigureSettings:
    """A picture of the table beside the page (``<name>.png``): each metric against ``x``, a dotted key of the arms'
    overlays; the arms that share every other key are one line (named by their names' common prefix), with the
    mean ± std over the spread; an arm without ``x`` (scratch) is a band."""

    x: str
    metrics: tuple[str, ...]
    title: str = ""


@dataclass(frozen=True)
class TrendAxis:
    """One axis of a trend: its points by name (``base`` is the study's base point, the others arms' suffixes) and the
    value of each on the axis (images seen, pixels, classes, trunk parameters); the fit and the figure use log2 of it."""

    label: str
    points: dict[str, float]

    def __post_init__(self):
        if "base" not in self.points or len(self.points) < 2:
            raise ConfigError("points: name the base point (base) and at least one other")
        for name, value in self.points.items():
            if value <= 0:
                raise ConfigError(f"points.{name}: {value} is not a positive axis value (the trend fits log2 of it)")


@dataclass(frozen=True)
class TrendProjection:
    """Every axis's line added up to a point no axis reached (``target``, each axis's value there: the paper's regime),
    and the value of ``solve_for`` at which the reference's gap to the best rival would close with the other axes at
    the target (:mod:`fdsml.tuning.study_projection`)."""

    label: str  # the target as a reader names it: "the paper's regime"
    target: dict[str, float]  # every axis of the trend, by name: its value at the target
    solve_for: str  # the axis whose closing value is solved for


@dataclass(frozen=True)
class TrendSettings:
    """How far one start leads the others as an axis of the regime grows: per axis (``axes``) and metric, the gap of
    ``reference`` to the best of ``rivals`` and of each to ``baseline`` at every point, their change per doubling and,
    where the gap narrows, the extrapolated crossing (:mod:`fdsml.tuning.study_trend`).

    The arm of start ``s`` at point ``p`` is ``s`` at the base point and ``s_p`` elsewhere; a start without an arm at
    a point (scratch does not change with the pre-training's steps) is its base arm there."""

    metrics: tuple[str, ...]
    reference: str
    rivals: tuple[str, ...]
    axes: dict[str, TrendAxis]
    baseline: str | None = None  # an arm every start is also compared to (raw-pixel k-NN)
    baseline_metrics: dict[str, str] = field(default_factory=dict)  # the baseline's metric set against each of ``metrics`` (its own name when absent)
    floor: str | None = None  # an arm shown beside them (scratch)
    spread: str | None = None  # the seed key whose values are the independent samples (others averaged first); null: every combination
    projection: TrendProjection | None = None  # every axis's line added, to a point beyond them all


@dataclass(frozen=True)
class NamedStep:
    """A step run again under a name of its own on the unit's parameters with ``overlay`` applied (the sweeps over a
    second factor range beside ``descriptor``'s); its metrics are ``<name>.<metric>``."""

    step: str
    overlay: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scale:
    """A smaller run of the study (``study.scale``): some arms, fewer seeds, an overlay applied last (fewer steps)."""

    arms: tuple[str, ...] | None = None  # null: every arm
    seeds: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # replaces these keys' values in the grid
    overlay: dict[str, Any] = field(default_factory=dict)
    named_steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # laid over a named step's own overlay (a converged fine-tuning made short)


@dataclass(frozen=True)
class StudyDefinition:
    """``conf/studies/<name>.yml``, parsed; the arms and seeds as the file orders them."""

    title: str
    question: str
    env: Literal["base", "cpu", "fair", "faithful", "paper"]
    steps: tuple[str, ...]
    arms: dict[str, dict[str, Any]]
    table: TableSettings
    overlay: dict[str, Any] = field(default_factory=dict)
    seeds: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    recipes: str | None = None  # a YAML file of named pretrain overlays (conf/fair/tuned_recipes.yml), read by study.recipe
    scales: dict[str, Scale] = field(default_factory=dict)  # named smaller runs (a check that it runs, a before/after)
    figure: FigureSettings | None = None
    more_tables: dict[str, TableSettings] = field(default_factory=dict)  # further tables of the page over the same units, by heading
    named_steps: dict[str, NamedStep] = field(default_factory=dict)  # steps run again with an overlay, by the name ``steps`` gives them
    trend: TrendSettings | None = None  # the gaps between starts along axes of the regime (its figure replaces ``figure``'s)
    first: tuple[str, ...] = ()  # arms whose units complete before any other starts (a machine check); one failing stops the study
    storage: str | None = None  # a journal file, relative to the project, committed with it: every clone reuses its units (:data:`JOURNAL_SUFFIXES`)


def tables(study: StudyDefinition) -> dict[str, TableSettings]:
    """Every table of the study by where the file sets it: ``table`` and each of ``more_tables``."""
    return {"table": study.table, **{f"more_tables.{heading}": table for heading, table in study.more_tables.items()}}


@dataclass(frozen=True)
class Unit:
    """One run of a study: an arm with one combination of the seeds."""

    arm: str
    seeds: dict[str, Any]

    @property
    def name(self) -> str:
        return self.arm + "".join(f"|{key}={value}" for key, value in self.seeds.items())


def read_study(path: Path) -> StudyDefinition:
    """Parse the study file at ``path``; a missing file, a wrong key or value raises ConfigError naming the file."""
    if not path.is_file():
        known = sorted(found.stem for found in path.parent.glob("*.yml"))
        guess = closest_key(path.stem, known)
        hint = f"; did you mean {guess}?" if guess else ""
        raise ConfigError(f"{path}: no such study file{hint} Studies: {', '.join(known) or 'none'}")
    raw = yaml.safe_load(path.read_text())
    try:
        study = parse(StudyDefinition, raw, "study")
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from error
    _check_arms(study, path)
    _check_storage(study, path)
    return study


def _check_storage(study: StudyDefinition, path: Path) -> None:
    """A study file's ``storage`` is a journal file inside the project: a database URL would put its server, and perhaps
    its user, into a committed file, and a path outside the project would not travel with it."""
    if study.storage is None:
        return
    where = PurePosixPath(study.storage)
    if "://" in study.storage or not study.storage.endswith(JOURNAL_SUFFIXES) or where.is_absolute() or ".." in where.parts:
        raise ConfigError(
            f"{path}: storage: {study.storage!r} must be a journal file inside the project, ending {' or '.join(JOURNAL_SUFFIXES)} "
            f"(results/studies/{path.stem}.jsonl); a team's database goes in study.storage on the command line instead"
        )


def changes_units(scale: Scale) -> bool:
    """Whether ``scale`` runs units unlike the study's own (an overlay, a named step's overlay): a check, not a result."""
    return bool(scale.overlay or scale.named_steps)


def _check_arms(study: StudyDefinition, path: Path) -> None:
    if not study.arms:
        raise ConfigError(f"{path}: arms: give at least one arm")
    for name, overlay in study.arms.items():
        own = arm_study_keys(overlay)
        unknown = sorted(set(own) - set(STUDY_KEYS))
        if unknown:
            guess = closest_key(unknown[0], STUDY_KEYS)
            meant = f" (did you mean study.{guess}?)" if guess else ""
            raise ConfigError(f"{path}: arms.{name}: unknown key study.{unknown[0]}{meant}; an arm's study keys: {', '.join(STUDY_KEYS)}")
        if not isinstance(own.get("seeded", True), bool):
            raise ConfigError(f"{path}: arms.{name}: study.seeded must be true or false, got {own['seeded']!r}")
        if "recipe" in own and study.recipes is None:
            raise ConfigError(f"{path}: arms.{name}: study.recipe names a recipe but the study has no recipes file (recipes: PATH)")
    for where, table in tables(study).items():
        for arm in (arm for arm in table.arms or () if arm not in study.arms):
            raise ConfigError(f"{path}: {where}.arms: {_none_of(arm, 'arm', study.arms)}")
        if table.reference is not None and table.reference not in study.arms:
            raise ConfigError(f"{path}: {where}.reference: {_none_of(table.reference, 'arm', study.arms)}")
        if table.reference is not None and table.arms is not None and table.reference not in table.arms:
            raise ConfigError(f"{path}: {where}.reference: {table.reference!r} is not among the table's arms; add it to {where}.arms")
        if table.spread is not None and table.spread not in study.seeds:
            raise ConfigError(f"{path}: {where}.spread: {_none_of(table.spread, 'seed key', study.seeds)}")
    for arm in (arm for arm in study.first if arm not in study.arms):
        raise ConfigError(f"{path}: first: {_none_of(arm, 'arm', study.arms)}")
    if study.trend is not None:
        _check_trend(study, path)
    for name, scale in study.scales.items():
        for arm in (arm for arm in scale.arms or () if arm not in study.arms):
            raise ConfigError(f"{path}: scales.{name}.arms: {_none_of(arm, 'arm', study.arms)}")
        for key in (key for key in scale.seeds if key not in study.seeds):
            raise ConfigError(f"{path}: scales.{name}.seeds: {_none_of(key, 'seed key', study.seeds)}")
        for step in (step for step in scale.named_steps if step not in study.named_steps):
            raise ConfigError(f"{path}: scales.{name}.named_steps: {_none_of(step, 'named step', study.named_steps or ['(none)'])}")


def _check_trend(study: StudyDefinition, path: Path) -> None:
    """Every start the trend compares has its base arm; the reference and rivals have an arm at every point of every axis."""
    trend = study.trend
    if study.figure is not None:
        raise ConfigError(f"{path}: trend and figure: a study draws one picture; the trend's replaces the figure's, drop one")
    for start in (trend.reference, *trend.rivals, trend.baseline, trend.floor):
        if start is not None and start not in study.arms:
            raise ConfigError(f"{path}: trend: {_none_of(start, 'arm', study.arms)}")
    if trend.spread is not None and trend.spread not in study.seeds:
        raise ConfigError(f"{path}: trend.spread: {_none_of(trend.spread, 'seed key', study.seeds)}")
    for axis_name, axis in trend.axes.items():
        for point in (point for point in axis.points if point != "base"):
            for start in (trend.reference, *trend.rivals):
                if trend_arm(start, point) not in study.arms:
                    raise ConfigError(f"{path}: trend.axes.{axis_name}.points.{point}: no arm {trend_arm(start, point)} ({start} at {point})")
    if trend.projection is not None:
        _check_projection(trend.projection, trend.axes, path)


def _check_projection(projection: TrendProjection, axes: Mapping[str, TrendAxis], path: Path) -> None:
    """The target gives every axis a positive value (an axis left out would be held at its base silently) and
    ``solve_for`` is one of them."""
    for name in axes:
        if name not in projection.target:
            raise ConfigError(f"{path}: trend.projection.target: no value for the axis {name!r}; give every axis its value at the target")
    for name, value in projection.target.items():
        if name not in axes:
            raise ConfigError(f"{path}: trend.projection.target.{name}: {_none_of(name, 'axis', axes)}")
        if value <= 0:
            raise ConfigError(f"{path}: trend.projection.target.{name}: {value} is not a positive axis value (the lines are in log2 of it)")
    if projection.solve_for not in axes:
        raise ConfigError(f"{path}: trend.projection.solve_for: {_none_of(projection.solve_for, 'axis', axes)}")


def trend_arm(start: str, point: str) -> str:
    """The arm of ``start`` at a trend's ``point``: the start's own arm at the base point, ``<start>_<point>`` elsewhere."""
    return start if point == "base" else f"{start}_{point}"


def _none_of(name: str, kind: str, known) -> str:
    guess = closest_key(name, known)
    return f"{name!r} is no {kind} of the study{f' (did you mean {guess}?)' if guess else ''}; known: {', '.join(known)}"


def arm_study_keys(overlay: Mapping[str, Any]) -> dict[str, Any]:
    """The ``study.*`` keys of an arm's overlay (what it runs), as a plain mapping."""
    return dict(with_overlay({}, overlay).get("study") or {})


def parameter_overlay(overlay: Mapping[str, Any]) -> dict[str, Any]:
    """An arm's overlay without its ``study.*`` keys: the parameters it changes, nested."""
    nested = with_overlay({}, overlay)
    nested.pop("study", None)
    return nested


def parameter_overlay_keys(overlay: Mapping[str, Any]) -> dict[str, Any]:
    """An arm's overlay without its ``study.*`` keys, flat: each dotted key and its value (``pretrain.train.max_steps: 30``)."""
    flat: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, Mapping) and value:
                walk(value, f"{prefix}{key}.")
            else:
                flat[prefix + key] = value

    walk(parameter_overlay(overlay), "")
    return flat


def arm_steps(study: StudyDefinition, arm: str) -> tuple[str, ...]:
    """The steps ``arm`` runs: its ``study.steps``, else the study's."""
    return tuple(arm_study_keys(study.arms[arm]).get("steps", study.steps))


def scaled(study: StudyDefinition, scale: str | None) -> tuple[StudyDefinition, dict[str, Any]]:
    """The study as the named scale runs it (its arms and seed values), and the overlay to apply last (``None``: the whole study)."""
    if scale is None:
        return study, {}
    if scale not in study.scales:
        raise ConfigError(f"study.scale: {_none_of(scale, 'scale', study.scales or ['(none)'])}")
    chosen = study.scales[scale]
    arms = {arm: overlay for arm, overlay in study.arms.items() if chosen.arms is None or arm in chosen.arms}
    seeds = {key: tuple(chosen.seeds.get(key, values)) for key, values in study.seeds.items()}
    named = {name: replace(step, overlay={**step.overlay, **chosen.named_steps.get(name, {})}) for name, step in study.named_steps.items()}
    return replace(study, arms=arms, seeds=seeds, named_steps=named), dict(chosen.overlay)


def units(study: StudyDefinition) -> list[Unit]:
    """Every arm with every combination of the seeds (an arm with ``study.seeded: false`` once, without them), in the file's order."""
    keys = list(study.seeds)
    combinations = [dict(zip(keys, values)) for values in itertools.product(*(study.seeds[key] for key in keys))]
    return [Unit(arm, seeds) for arm in study.arms for seeds in (combinations if seeded(study, arm) else [{}])]


def seeded(study: StudyDefinition, arm: str) -> bool:
    """Whether ``arm`` runs once per combination of the seeds (every arm but one with ``study.seeded: false``)."""
    return arm_study_keys(study.arms[arm]).get("seeded", True) is not False
