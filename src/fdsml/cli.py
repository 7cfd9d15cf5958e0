"""The project's ``kedro run``: Kedro's own command, with a short answer to mistakes the user can fix.

Kedro takes a ``run`` command from the project's ``cli.py`` in place of its own. This one has
exactly Kedro's options and behaviour, but for two things. ``--pipeline`` (the design card's
``kedro run --pipeline=pretrain``) is an alias of ``--pipelines``, without the deprecation notice
Kedro 1.7 prints for it. And only when the run fails with a
:class:`~fdsml.errors.UserFixableError` (anywhere in the exception chain) does it end with the
error's message, which names the key or file and the fix, and exit code 1. The full traceback
then goes to the log file of ``conf/logging.yml`` instead of the console. Any other exception,
a real bug, shows its traceback as usual.
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click
from kedro.framework.cli.project import run as kedro_run
from kedro.framework.cli.utils import split_string

from fdsml.config import ConfigError, require_each_key_once
from fdsml.errors import find_user_error

logger = logging.getLogger(__name__)


@click.group(name="fdsml")
def cli() -> None:
    """Project commands (``kedro run`` with short answers to fixable mistakes)."""


PIPELINE_ALIAS_HELP = "Alias of --pipelines: a registered pipeline's name, or comma-separated names."


def _options_with_the_pipeline_alias() -> list[click.Parameter]:
    """Kedro's ``run`` options, with ``--pipeline`` documented as the alias it is here and ``--params`` refusing a
    key given twice (Kedro keeps the last one silently)."""
    options = []
    for option in kedro_run.params:
        if option.name == "pipeline":
            option = copy.copy(option)
            option.help = PIPELINE_ALIAS_HELP
        elif option.name == "params":
            option = copy.copy(option)
            option.callback = _each_key_once(option.callback)
        options.append(option)
    return options


def _each_key_once(split_params):
    """Kedro's ``--params`` callback, refusing first a key the string gives twice."""

    def callback(context: click.Context, param: click.Parameter, value):
        if isinstance(value, str):
            try:
                require_each_key_once(split_string(context, param, value))
            except ConfigError as error:
                raise click.BadParameter(str(error).removeprefix("--params: "), context, param) from None
        return split_params(context, param, value)

    return callback


def _resolve_pipeline_alias(context: click.Context, options: dict) -> None:
    if options["pipeline"]:
        if options["pipelines"]:
            raise click.UsageError("--pipeline is an alias of --pipelines: give one of them, not both")
        options["pipelines"] = split_string(context, None, options["pipeline"])
        options["pipeline"] = None


@cli.command(name="run", params=_options_with_the_pipeline_alias(), help=kedro_run.help, short_help=kedro_run.short_help)
@click.pass_context
def run(context: click.Context, **options) -> dict:
    _resolve_pipeline_alias(context, options)
    with short_answers_to_user_errors():
        return kedro_run.callback(**options)


CHECK_OPTIONS = ("env", "pipeline", "pipelines", "params", "conf_source")


@cli.command(name="check", params=[o for o in _options_with_the_pipeline_alias() if o.name in CHECK_OPTIONS])
@click.pass_context
def check(context: click.Context, **options) -> None:
    """Check a run before any work, as `kedro run` does first, and run nothing.

    Every parameter key is known (the closest is named otherwise); each selected pipeline's values, dataset
    folders and layouts, that every listed image decodes (cached by content), Recall@K against what a query
    searches, each starting point's checkpoint backbone, and the inputs other pipelines write.
    """
    _resolve_pipeline_alias(context, options)
    from kedro.framework.project import pipelines as registered
    from kedro.framework.session import KedroSession
    from kedro.pipeline import Pipeline

    from fdsml.hooks import UpstreamInputs, check_before_work

    names = list(options["pipelines"] or ["__default__"])
    unknown = [name for name in names if name not in registered]
    if unknown:
        raise click.UsageError(f"--pipelines: no pipeline {', '.join(unknown)}; choose from {', '.join(sorted(registered))}")
    with short_answers_to_user_errors():
        create = {key: options[key] for key in ("env", "conf_source")} | {"runtime_params": options["params"]}
        with KedroSession.create(**create) as session:
            catalog = session.load_context().catalog
            selected = sum((registered[name] for name in names), Pipeline([]))
            check_before_work(selected, catalog)
            UpstreamInputs().before_pipeline_run({"env": options["env"], "pipeline_names": options["pipelines"]}, selected, catalog)
    click.echo(f"{', '.join(names)}: nothing wrong found; `kedro run` would start the work")


def registered_plugins() -> dict[str, dict[str, str]]:
    """Every plug-in a run may select, by kind (with the key that selects it): each name and the module registering it."""
    from fdsml.data.classification_datasets import available_classification_datasets, classification_reader_module
    from fdsml.data.retrieval_datasets import available_datasets, reader_module
    from fdsml.families import get_family, known_families
    from fdsml.training.pretrain_objectives import known_objectives, objective_recipe

    return {
        "objectives (pretrain.objective)": {name: type(objective_recipe(name)).__module__ for name in known_objectives()},
        "formula families (fractals.family)": {name: type(get_family(name)).__module__ for name in known_families()},
        "retrieval datasets (retrieval.data.dataset)": {name: reader_module(name) for name in available_datasets()},
        "classification datasets (classification.datasets[].name)": {
            name: classification_reader_module(name) for name in available_classification_datasets()
        },
    }


@cli.command(name="plugins")
def list_plugins() -> None:
    """The objectives, formula families and datasets a run selects by name, each with the module that registers it:
    a module of the project's folders, or of a package installed beside it (its entry points; docs/plugins.md)."""
    with short_answers_to_user_errors():
        found = registered_plugins()
    for kind, names in found.items():
        click.echo(f"{kind}:")
        width = max(map(len, names))
        for name, module in names.items():
            click.echo(f"  {name:<{width}}  {module}")


@cli.group(name="runs")
def runs() -> None:
    """Pre-training run folders (one per run fingerprint under pretrain.run_dir)."""


RUN_DIR_OPTION = click.option(
    "--run-dir", default="data/06_models/pretrain_run", show_default=True, help="pretrain.run_dir of the runs"
)


@runs.command(name="list")
@RUN_DIR_OPTION
def list_run_folders(run_dir: str) -> None:
    """The run folders, most recently written first."""
    from fdsml.training.run_folders import list_runs  # here: torch loads only for this command

    found = list_runs(run_dir)
    for run in found:
        click.echo(run.describe())
    if not found:
        click.echo(f"no run folders under {run_dir}")


@runs.command(name="remove")
@RUN_DIR_OPTION
@click.option("--keep", type=int, default=None, help="keep the N most recently written runs, remove the rest")
@click.argument("names", nargs=-1)
def remove_run_folders(run_dir: str, keep: int | None, names: tuple[str, ...]) -> None:
    """Remove the run folders NAMES, or all but the --keep N newest."""
    from fdsml.config import ConfigError
    from fdsml.training.run_folders import remove_runs

    try:
        removed = remove_runs(run_dir, keep=keep, names=names)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    for run in removed:
        click.echo(f"removed {run.path}")


class _HideUserErrorEcho(logging.Filter):
    """Keeps records about a user-fixable error (Kedro's echo of it, its traceback) off the console."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        carried = record.exc_info[1] if record.exc_info else None
        return find_user_error(carried or sys.exc_info()[1]) is None


def _log_files() -> list[str]:
    return [handler.baseFilename for handler in logging.getLogger().handlers if isinstance(handler, logging.FileHandler)]


@contextmanager
def short_answers_to_user_errors() -> Iterator[None]:
    """Turn a user-fixable failure inside the block into its message and exit code 1.

    Needs a log file for the traceback; without one (a custom logging configuration), the
    traceback stays on the console as Kedro prints it.
    """
    files = _log_files()
    consoles = [handler for handler in logging.getLogger().handlers if not isinstance(handler, logging.FileHandler)]
    echo_filter = _HideUserErrorEcho()
    for handler in consoles if files else ():
        handler.addFilter(echo_filter)
    try:
        yield
    except Exception as error:
        user_error = find_user_error(error)
        if user_error is None or not files:
            raise
        logger.error("The run stopped: %s", user_error, exc_info=error)
        kind = getattr(user_error, "kind", type(user_error).__name__)  # a check before the first node names what it found
        click.secho(f"{kind}: {user_error}", fg="red", err=True)
        click.echo(f"(the full traceback is in {files[0]})", err=True)
        raise SystemExit(1) from None
    finally:
        for handler in consoles:
            handler.removeFilter(echo_filter)
