"""Run a study file (:mod:`fdsml.tuning.study_file`): each arm x seed combination a trial of :func:`fdsml.tuning.arms.run_arms`.

A unit's parameters are the study's environment with, in this order, the study's shared overlay, the
arm's recipe (``study.recipe``), the arm's overlay, its seeds and the run's own overlay
(``study.overlay``: a small scale) applied with :func:`fdsml.config.with_overlay`. Its fingerprint
(:func:`fdsml.fingerprints.fingerprint`) covers the defining configuration of every section its steps read,
its seeds, its steps (a named step's overlay too) and their code: a COMPLETE unit is reused while it is
unchanged, a changed or failed one runs again. Pre-training runs share one folder keyed by their own
fingerprints (:mod:`fdsml.tuning.study_steps`), so the fine-tuning seeds of one pre-trained model
pre-train once. Every step's CPU seconds, and its stages', are metrics any table may show
(``cpu_seconds.<step>``, ``cpu_seconds.<step>.<stage>``).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from fdsml import fingerprints, plugins
from fdsml.config import ConfigError, closest_key, parse, require_name, with_overlay
from fdsml.distributed import resolve_device
from fdsml.machine import machine_name
from fdsml.native_bf16 import device_has_bf16
from fdsml.tuning.arms import STUDIES_DIR, arm_results, open_arms_study, run_arms
from fdsml.tuning.study_file import NamedStep, StudyDefinition, Unit, arm_steps, arm_study_keys, changes_units, parameter_overlay, scaled, tables, units
from fdsml.tuning.study_steps import STEPS, Metrics, Step
from fdsml.tuning.study_table import markdown_table, study_rows
from fdsml.tuning.study_projection import projection_json, projection_markdown, projections
from fdsml.tuning.study_trend import trend_json, trend_markdown, trend_results

logger = logging.getLogger(__name__)
SECTION_PARSERS = {
    "fractals": ("fdsml.data.fractals_config", "parse_fractals_params"),
    "pretrain": ("fdsml.training.pretrain", "parse_pretrain_params"),
    "retrieval": ("fdsml.training.retrieval", "parse_retrieval_params"),
    "classification": ("fdsml.training.classification", "parse_classification_params"),
    "validate_descriptor": ("fdsml.descriptor_validation.measure", "parse_validate_descriptor_params"),
}
"""How each section a step reads is parsed: its fingerprint is the parsed section's defining fields (the
fractals' are their keys but ``outputs``, which only say what the fractals pipeline writes beside the table)."""
TRAINED_SECTIONS = frozenset({"pretrain", "retrieval", "classification"})
"""The sections whose ``train`` block says how a step trains (``amp``, ``device``)."""


@dataclass(frozen=True)
class StudySettings:
    """``params:study``: which study file runs (at which of its scales), on how many workers, where."""

    name: str | None = None  # conf/studies/<name>.yml
    scale: str | None = None  # null: the whole study | one of the file's scales (some arms, fewer seeds and steps)
    jobs: int = 1  # units run in parallel, one process each
    threads: int = 1  # torch threads of each process
    storage: str | None = None  # the units' Optuna storage (null: the study file's journal, else <storage_dir>/<name>.db); a URL or journal file several machines share
    devices: tuple[int, ...] = ()  # the GPUs of the workers, one each (CUDA_VISIBLE_DEVICES of worker k: devices[k]); empty: as the machine has them
    storage_dir: str = STUDIES_DIR
    run_dir: str = "data/06_models/studies"  # <run_dir>/pretrain: the pre-training runs every study shares; <run_dir>/<name>/units: its fine-tunings
    conf_source: str = "conf"  # the configuration folder holding studies/ and the environments
    draw_only: bool = False  # true: run no unit; the page from the units already complete (a committed journal, a team's storage), naming those missing

    def __post_init__(self):
        if self.name is not None:
            require_name("study.name", self.name)  # it names the study file, its storage, runs, page and figure


@dataclass(frozen=True)
class UnitPlan:
    """A unit ready to run: its parameters, steps (the named ones among them by name) and fingerprint."""

    unit: Unit
    parameters: dict[str, Any]
    steps: tuple[str, ...]
    fingerprint: str
    named: dict[str, NamedStep]


def resolved_step(study: StudyDefinition, name: str) -> tuple[Step, NamedStep | None]:
    """The step ``name`` in ``steps`` runs, and its entry of ``named_steps`` (None for a step of :data:`STEPS` itself)."""
    named = study.named_steps.get(name)
    return _step_of(name, named), named


def _step_of(name: str, named: NamedStep | None) -> Step:
    """The step of :data:`STEPS` that ``name`` runs: a named step's ``step``, else ``name`` itself."""
    return STEPS[named.step if named else name]


def step_metrics(study: StudyDefinition, name: str) -> tuple[str, ...]:
    """The metrics the step ``name`` may yield: its own (a named step's as ``<name>.<metric>``) and its CPU seconds."""
    step, named = resolved_step(study, name)
    own = tuple(f"{name}.{metric}" for metric in step.metrics) if named else step.metrics
    return own + (f"cpu_seconds.{name}",) + tuple(f"cpu_seconds.{name}.{stage}" for stage in step.stages)


def parse_study_settings(params: dict[str, Any]) -> StudySettings:
    """Validate ``params:study``; a wrong key or value raises ConfigError naming it."""
    settings = parse(StudySettings, params, "study")
    if settings.devices and len(settings.devices) != settings.jobs:
        raise ConfigError(f"study.devices: {len(settings.devices)} device(s) for {settings.jobs} worker(s) (study.jobs); give one per worker, e.g. study.jobs={len(settings.devices)}")
    return settings


def study_path(settings: StudySettings) -> Path:
    if settings.name is None:
        raise ConfigError("study.name: name the study to run, e.g. --params=study.name=pretraining_budget (a file of conf/studies/)")
    return Path(settings.conf_source) / "studies" / f"{settings.name}.yml"


def read_recipes(study: StudyDefinition, conf_source: str) -> dict[str, dict[str, Any]]:
    """The study's recipes file (relative to the project: ``conf/...``), each a pretrain overlay; none without one."""
    if study.recipes is None:
        return {}
    path = Path(conf_source).parent / study.recipes
    recipes = yaml.safe_load(path.read_text()) if path.is_file() else None
    if not isinstance(recipes, dict) or not all(isinstance(recipe, dict) for recipe in recipes.values()):
        raise ConfigError(f"recipes: {path} must be a YAML mapping of recipe names to pretrain overlays")
    for arm, overlay in study.arms.items():
        name = arm_study_keys(overlay).get("recipe")
        if name is not None and name not in recipes:
            guess = closest_key(str(name), recipes)
            raise ConfigError(f"arms.{arm}.study.recipe: {path} has no recipe {name!r}{f' (did you mean {guess}?)' if guess else ''}")
    return recipes


def unit_parameters(study: StudyDefinition, settings: StudySettings, base: dict, recipes: dict, unit: Unit, last: dict) -> dict[str, Any]:
    """The unit's parameters: the environment's with the shared overlay, recipe, arm overlay, seeds and the scale's overlay (``last``)."""
    params = with_overlay(base, study.overlay)
    recipe = arm_study_keys(study.arms[unit.arm]).get("recipe")
    if recipe is not None:
        params = with_overlay(params, {"pretrain": recipes[recipe]})
    params = with_overlay(params, parameter_overlay(study.arms[unit.arm]))
    params = with_overlay(with_overlay(params, unit.seeds), last)
    own = {"pretrain.run_dir": str(Path(settings.run_dir) / "pretrain"), "pretrain.live_dir": None, "retrieval.live_dir": None, "classification.live_dir": None}
    return with_overlay(params, own)


def defining_sections(params: dict[str, Any], steps: tuple[Step, ...]) -> tuple[dict[str, Any], set[str]]:
    """The defining fields of every section ``steps`` read (paths, log intervals and workers left out), and the
    modules of the plug-ins those sections select (:func:`fdsml.plugins.selected_modules`)."""
    import importlib

    parsed, modules = {}, set()
    for section in sorted({section for step in steps for section in step.sections}):
        module, function = SECTION_PARSERS[section]
        config = getattr(importlib.import_module(module), function)(params[section])
        modules.update(plugins.selected_modules(config))
        if section == "fractals":
            parsed[section] = {key: value for key, value in params[section].items() if key != "outputs"}
        else:
            parsed[section] = fingerprints.defining_configuration(config)
    return parsed, modules


def plan_units(study: StudyDefinition, settings: StudySettings, base: dict[str, Any]) -> dict[str, UnitPlan]:
    """Every unit the run asks for, by name, with its parameters and fingerprint."""
    recipes = read_recipes(study, settings.conf_source)
    chosen, last = scaled(study, settings.scale)
    plans = {}
    for unit in units(chosen):
        params = unit_parameters(study, settings, base, recipes, unit, last)
        steps = arm_steps(study, unit.arm)
        named = {name: chosen.named_steps[name] for name in steps if name in chosen.named_steps}
        resolved = tuple(resolved_step(study, name)[0] for name in steps)
        sections, code = defining_sections(params, resolved)
        definition = {"steps": list(steps), "seeds": unit.seeds, "sections": sections}
        if named:
            definition["named_steps"] = {name: {"step": found.step, "overlay": found.overlay} for name, found in named.items()}
        code |= _check_named_steps(params, named)  # before the overlays are read: a wrong key's message names the named step
        read = tuple((with_overlay(params, named[name].overlay) if name in named else params, step) for name, step in zip(steps, resolved))
        if bf16 := computes_bf16(read):
            definition["bf16"] = bf16
        fingerprint = fingerprints.fingerprint(definition, code=("fdsml.tuning.study_steps", *sorted(code)))[:16]
        unit_dir = Path(settings.run_dir) / str(settings.name) / "units" / fingerprint
        params = with_overlay(params, {"retrieval.run_dir": str(unit_dir / "retrieval"), "classification.run_dir": str(unit_dir / "classification")})
        plans[unit.name] = UnitPlan(unit, params, steps, fingerprint, named)
    return plans


def computes_bf16(steps: tuple[tuple[dict[str, Any], Step], ...]) -> dict[str, bool]:
    """The training sections the unit's steps read that train with ``amp`` on, each with whether this machine's device
    computes bf16 natively; empty when none would. Each step comes with the parameters it reads (a named step's with
    its overlay, which may turn ``amp`` on). A unit's key takes it in: a unit trained in bf16 is not reused on a machine
    that would train it in float32 (a committed journal travels between both), while a float32 unit keeps one key."""
    found: dict[str, bool] = {}
    for params, step in steps:
        for section in sorted(set(step.sections) & TRAINED_SECTIONS):
            loop = params[section].get("train", {})
            if loop.get("amp", True):
                found[section] = found.get(section, False) or device_has_bf16(resolve_device(loop.get("device", "auto")))
    return dict(sorted(found.items())) if any(found.values()) else {}


def _check_named_steps(params: dict[str, Any], named: dict[str, NamedStep]) -> set[str]:
    """Each named step's overlay changes keys the unit's parameters have, to values the sections' parsers accept;
    the modules of the plug-ins the overlaid sections select."""
    modules = set()
    for name, found in named.items():
        try:
            modules |= defining_sections(with_overlay(params, found.overlay, only_existing=True), (STEPS[found.step],))[1]
        except ConfigError as error:
            raise ConfigError(f"named_steps.{name}.overlay: {error}") from error
    return modules


def run_step(plan: UnitPlan, name: str, state: dict[str, Any]) -> Metrics:
    """Run the unit's step ``name`` (a named one on its overlaid parameters); its metrics and CPU seconds, the whole
    step's and each stage's (:class:`fdsml.timers.CpuSeconds`)."""
    from fdsml.timers import CpuSeconds

    named = plan.named.get(name)
    params = with_overlay(plan.parameters, named.overlay | _own_run_folders(plan, name)) if named else plan.parameters
    whole, state["cpu"] = CpuSeconds(), CpuSeconds()
    with whole.stage(name):
        found = _step_of(name, named).run(params, state)
    metrics = {f"{name}.{key}": value for key, value in found.items()} if named else found
    stages = {f"cpu_seconds.{name}.{stage}": seconds for stage, seconds in state.pop("cpu").seconds.items()}
    return metrics | {f"cpu_seconds.{name}": whole.seconds[name]} | stages


def _own_run_folders(plan: UnitPlan, name: str) -> dict[str, str]:
    """The run folders of the unit's named step ``name``, beside its plain steps' (``<unit>/<name>/retrieval``): a
    fine-tuning that shares its start and seed with the plain step's (``converged`` with ``finetune``) would
    otherwise find the other's checkpoint in its folder, and a unit stopped in it would train both again from step 0."""
    unit_dir = Path(plan.parameters["retrieval"]["run_dir"]).parent
    return {f"{section}.run_dir": str(unit_dir / name / section) for section in ("retrieval", "classification")}


def run_unit(plans: dict[str, UnitPlan], threads: int, headline: str, name: str) -> tuple[float, dict]:
    """Run one unit's steps; its headline metric and its result (arm, seeds, metrics, commit, machine)."""
    import numba
    import torch

    torch.set_num_threads(threads)
    numba.set_num_threads(threads)
    plan = plans[name]
    state: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    failure = None
    try:
        for step in plan.steps:
            metrics |= run_step(plan, step, state)
    except Exception as error:
        failure = error
    if failure is not None:  # logged outside the handler: the console hides records raised while a user's error is handled
        logger.error("unit %s failed: %s: %s", name, type(failure).__name__, failure)
        raise failure
    shutil.rmtree(Path(plan.parameters["retrieval"]["run_dir"]).parent, ignore_errors=True)  # its fine-tunings: of no use once its result is stored
    logger.info("%s: %s", name, ", ".join(f"{key} {value:.4f}" for key, value in metrics.items()))
    result = {"arm": plan.unit.arm, "seeds": plan.unit.seeds, "metrics": metrics, "commit": _git_commit(), "machine": machine_name()}
    return metrics.get(headline, 0.0), result


def _git_commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


class StudyRun(NamedTuple):
    """What a study run leaves: the complete units' results, the units that raised, and the units not complete
    (those that raised, or, with ``study.draw_only``, every unit not yet run)."""

    results: list[dict]
    failed: list[str]
    missing: list[str]


def run_study(study: StudyDefinition, settings: StudySettings, base: dict[str, Any]) -> StudyRun:
    """Run every unit not yet COMPLETE (``settings.jobs`` at a time; none with ``draw_only``) on ``base`` (the
    parameters of the study's environment)."""
    plans = plan_units(study, settings, base)
    settings = replace(settings, storage=units_storage(study, settings))
    fingerprints = {name: plan.fingerprint for name, plan in plans.items()}
    failed = [] if settings.draw_only else _run_units(study, settings, plans, fingerprints)
    complete = arm_results(open_arms_study(str(settings.name), settings.storage, settings.storage_dir), fingerprints)
    results = complete["result"].tolist()
    keys = {table.trials for table in tables(study).values() if table.trials is not None}
    if keys:  # each unit's number of trials per key the tables name, read from its parameters (a reused unit's too)
        results = [result | {"trials": {key: trials(plans[name].parameters, key) for key in keys}} for name, result in zip(complete["arm"], results)]
    done = set(complete["arm"])
    return StudyRun(results, failed, [name for name in plans if name not in done])


def _run_units(study: StudyDefinition, settings: StudySettings, plans: dict[str, UnitPlan], fingerprints: dict[str, str]) -> list[str]:
    """Run the units not yet COMPLETE, the file's ``first`` arms (a machine check) alone before the rest; those that raised."""
    run = partial(run_unit, plans, settings.threads, study.table.metrics[0])
    first = {name: fingerprint for name, fingerprint in fingerprints.items() if plans[name].unit.arm in study.first}
    failed = run_arms(str(settings.name), first, run, 1, settings.storage, settings.storage_dir) if first else []
    if failed:  # the machine check failed: the rest spend no hour on it
        return failed
    rest = {name: fingerprint for name, fingerprint in fingerprints.items() if name not in first}
    return run_arms(str(settings.name), rest, run, settings.jobs, settings.storage, settings.storage_dir, tuple(map(str, settings.devices)))


def units_storage(study: StudyDefinition, settings: StudySettings) -> str | None:
    """Where the run keeps its units: ``study.storage`` when given, else the study file's journal (relative to the
    project, its folder made) when the run's units are the study's own, else None (``<storage_dir>/<name>.db``): a
    scale that changes its units (``tiny``) never writes into the journal a clone reuses."""
    if settings.storage is not None:
        return settings.storage
    if study.storage is None or (settings.scale is not None and changes_units(study.scales[settings.scale])):
        return None
    journal = Path(settings.conf_source).parent / study.storage
    journal.parent.mkdir(parents=True, exist_ok=True)
    return str(journal)


def trials(parameters: dict[str, Any], key: str) -> int:
    """The value of the dotted ``key`` (``table.trials``) in a unit's parameters: the number of trials behind its proportions."""
    node: Any = parameters
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"table.trials: {key!r} is no parameter of the study's units (it names the number of trials, e.g. validate_descriptor.n_triplets)")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int) or node <= 0:
        raise ConfigError(f"table.trials: {key} is {node!r}; it must be a positive number of trials")
    return node


def study_report(study: StudyDefinition, settings: StudySettings, results: list[dict], missing: Sequence[str] = ()) -> tuple[str, dict]:
    """The study's page (Markdown: question, setup, table, its figure's link, how to reproduce) and its results as JSON;
    ``missing`` (unit names) are the units not complete, which the page names before its tables.

    The figure is linked by file name: the catalog writes it beside the page, named like it (``study_figure``)."""
    rows = study_rows(results, study)
    more = {heading: study_rows(results, replace(study, table=table)) for heading, table in study.more_tables.items()}
    trend = trend_results(results, study) if study.trend else None
    projected = projections(trend, study) if trend and study.trend.projection else None
    ran, _ = scaled(study, settings.scale)  # a scale's seeds, not the file's, are what the units ran with
    seeds = ", ".join(f"`{key}` {list(values)}" for key, values in ran.seeds.items()) or "none"
    small = f" At scale `{settings.scale}` (the file's `scales.{settings.scale}`)." if settings.scale else ""
    commits = ", ".join(sorted({result["commit"] for result in results}))
    machines = "; ".join(sorted({result.get("machine", "not recorded") for result in results}))  # units stored before machines were
    page = (
        f"# {study.title}\n\n{study.question.strip()}\n\n"
        f"Environment `{study.env}`, steps {', '.join(study.steps)}, seeds {seeds}; in the table mean ± std over "
        f"{study.table.spread or 'every seed combination'}{'' if not study.table.percent else ', in %'}.{small} Commit(s) {commits}; machine(s) {machines}.\n\n"
        + (partial_note(missing, len(results) + len(missing)) if missing else "")
        + markdown_table(rows, study)
        + "".join(f"\n**{heading}**\n\n" + markdown_table(more[heading], replace(study, table=table)) for heading, table in study.more_tables.items())
        + (trend_markdown(trend, study) + f"\n![the gaps along each axis]({settings.name}.png)\n" if trend else "")
        + (projection_markdown(projected, study) if projected else "")
        + (f"\n![{study.figure.title or ', '.join(study.figure.metrics)}]({settings.name}.png)\n" if study.figure else "")
        + f"\nReproduce: `kedro run --pipelines=study --params=study.name={settings.name}{f',study.scale={settings.scale}' if settings.scale else ''}` (units already complete with the same "
        "definition and code are reused; the definition: `conf/studies/" + f"{settings.name}.yml`).\n"
    )
    found = {"study": settings.name, "units": results, "missing": list(missing), "rows": rows, "more_tables": more}
    return page, found | ({"trend": trend_json(trend)} if trend else {}) | ({"projection": projection_json(projected)} if projected else {})


def partial_note(missing: Sequence[str], total: int) -> str:
    """The line a page drawn from some of its units opens with: how many are missing, counted by arm."""
    arms = Counter(name.split("|")[0] for name in missing)
    listed = ", ".join(f"`{arm}` {count}" for arm, count in arms.items())
    return (
        f"**Partial: {total - len(missing)} of {total} units complete.** Not yet run (units by arm): {listed}. Every table, "
        "trend and figure below is drawn from the complete units alone; a row or point whose units are all missing is absent.\n\n"
    )
