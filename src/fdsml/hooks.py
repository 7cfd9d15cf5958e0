"""Project hooks (registered in ``settings.py``): what a ``kedro run`` says before and after it works.

* :class:`UpstreamInputs`: a pipeline whose input files another pipeline writes stops at once,
  naming the command that writes them, instead of failing on a missing file mid-run.
* :class:`ChecksBeforeWork`: every replica checks the run's parameters (every key known), dataset
  folders, images and starting checkpoints before the first node, and all stop together with one message;
  a DVC remote that does not verify what it pulls is named in a warning.
* :class:`RunSummary`: a finished run says what it wrote and where, what it reused, and what to
  try next; when every step reused stored work, it says so and how to redo it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl
from kedro.framework.project import pipelines as registered_pipelines
from kedro.pipeline import Pipeline

from fdsml.errors import MissingInputError
from fdsml.integrity import unverified_remotes
from fdsml.run_events import StepReport, start_recording, stop_recording

logger = logging.getLogger(__name__)


def catalog_files(catalog) -> dict[str, str]:
    """The file or folder behind each catalog entry that has one, relative to the project when inside it."""
    files = {}
    for name, config in catalog.to_config()[0].items():
        if "filepath" in config:
            path = Path(config["filepath"])
            files[name] = str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
    return files


def missing_inputs(pipeline: Pipeline, catalog, files: dict[str, str]) -> list[str]:
    """The pipeline's free inputs that are catalog files not written yet."""
    return sorted(name for name in pipeline.inputs() if name in files and not catalog.exists(name))


def writers_of(missing: list[str], catalog, files: dict[str, str], available: dict[str, Pipeline]) -> list[str]:
    """The fewest registered pipelines, in data-flow order, that write ``missing`` and what they need in turn."""
    chosen: set[str] = set()
    while missing:
        for name in missing:
            writers = [key for key, pipe in available.items() if name in pipe.all_outputs()]
            if not writers:
                raise MissingInputError(f"{files[name]} is missing and no pipeline writes it")
            chosen.add(min(writers, key=lambda key: len(available[key].nodes)))
        missing = missing_inputs(sum((available[key] for key in chosen), Pipeline([])), catalog, files)
    covered = {key for key in chosen for other in chosen if other != key and set(available[key].nodes) <= set(available[other].nodes)}
    flow = {node: index for index, node in enumerate(sum(available.values(), Pipeline([])).nodes)}
    return sorted(chosen - covered, key=lambda key: max(flow[node] for node in available[key].nodes))


class UpstreamInputs:
    """Stops a run whose inputs are missing with one line naming the command that makes them."""

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Pipeline, catalog) -> None:
        files = catalog_files(catalog)
        missing = missing_inputs(pipeline, catalog, files)
        if not missing:
            return
        registered_pipelines.set_requested(None)  # `kedro run --pipelines=X` loads only X; the writers are others
        available = {key: pipe for key, pipe in registered_pipelines.items() if key != "__default__"}
        env = f" --env {run_params['env']}" if run_params.get("env") else ""
        requested = ",".join(run_params.get("pipeline_names") or []) or "this run"
        writers = ",".join(writers_of(missing, catalog, files, available))
        raise MissingInputError(
            f"{requested} needs {', '.join(files[name] for name in missing)}, not written yet: "
            f"run `kedro run --pipelines={writers}{env}` first"
        )


def check_before_work(pipeline: Pipeline, catalog) -> None:
    """Every parameter of the run, and in full the sections ``pipeline`` reads (:mod:`fdsml.pipelines.run_checks`);
    a starting point's pre-trained model is the catalog's file unless this run writes it."""
    from fdsml.pipelines.run_checks import check_run  # here: torch loads when a run starts, not with the command line

    reads = {name.removeprefix("params:").split(".")[0] for name in pipeline.inputs() if name.startswith("params:")}
    writes = "pretrained_model" in pipeline.all_outputs()
    pretrained = catalog_files(catalog).get("pretrained_model") if not writes and catalog.exists("pretrained_model") else None
    check_run(catalog.load("parameters"), reads=reads, pretrained_model=pretrained)
    warn_of_unverified_remotes(Path.cwd())


def warn_of_unverified_remotes(project: Path) -> None:
    """A warning (rank 0's) per DVC remote of the project that takes pulled files without checking them against dvc.lock."""
    if int(os.environ.get("RANK", "0")) != 0:
        return
    for name in unverified_remotes(project):
        logger.warning(
            "DVC remote %r does not verify what it pulls: a file swapped on it would be used as is; "
            "`dvc remote modify %s verify true` (docs/teams.md#security)", name, name,
        )


class ChecksBeforeWork:
    """Before the first node, every replica checks the run's parameters, dataset folders, images and starting checkpoints."""

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Pipeline, catalog) -> None:
        check_before_work(pipeline, catalog)


class RunSummary:
    """At the end of a run: what it wrote, what it reused, what to try next (rank 0 only)."""

    def __init__(self):
        self._steps: list[StepReport] = []

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Pipeline, catalog) -> None:
        stop_recording(self._steps)  # a run stopped before it started (UpstreamInputs) never got to its end hooks
        self._steps = start_recording()

    @hook_impl
    def on_pipeline_error(self, error: Exception, run_params: dict[str, Any], pipeline: Pipeline, catalog) -> None:
        stop_recording(self._steps)

    @hook_impl
    def after_pipeline_run(self, run_params: dict[str, Any], run_result: dict, pipeline: Pipeline, catalog) -> None:
        stop_recording(self._steps)
        if int(os.environ.get("RANK", "0")) == 0:
            logger.info("%s", summarise_run(pipeline, catalog, self._steps))


def summarise_run(pipeline: Pipeline, catalog, steps: list[StepReport]) -> str:
    """The few lines :class:`RunSummary` prints."""
    files = catalog_files(catalog)
    lines = ["Outputs of this run:", *(f"  {files[name]}" for name in sorted(pipeline.all_outputs()) if name in files)]
    reused = [step for step in steps if step.reused]
    places = [files.get(step.where, step.where) for step in reused]
    lines += [f"Reused the {step.what} {place} ({step.detail})" for step, place in zip(reused, places)]
    if steps and len(reused) == len(steps):
        lines.append(f"Nothing needed doing. To redo it, delete what was reused: rm -r {' '.join(places)}")
    report = files.get("report")
    if report and "report" in pipeline.all_outputs():
        lines.append(f"Next: read {report}; `make viz` shows how every file was made")
    else:
        lines.append(
            "Next: `make viz` shows the pipelines and their files; `kedro run` (or `dvc repro`) runs the whole chain"
            + (f" and writes the report, {report}" if report else "")
        )
    return "\n".join(lines)
