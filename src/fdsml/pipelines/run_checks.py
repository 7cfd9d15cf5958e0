"""Checks a ``kedro run`` (and ``kedro check``) makes before its first node, on every replica.

Every parameter belongs to a known section and key: an unknown one, at any depth (a misspelt section
from ``--params`` too), stops the run naming the closest known key. Each selected pipeline's sections
are checked in full: their values; the presence and layout of every dataset folder they read (through
the readers' registries); the training plans (the images counted, the world size of the run); Recall@K against what a retrieval query searches; each starting point's
checkpoint backbone against the one it names; that every listed image decodes (a cache keyed by
the files' content, :mod:`fdsml.data.decode_check`); and that no image a model is scored on has a copy among the
training or scored images (:mod:`fdsml.data.leaks`).

Under ``torchrun`` each replica checks its own view (dataset folders may sit on node-local
disks), then all replicas compare: when any finds a problem, every replica stops with the same
message, naming the ranks where it differs, before any work is done.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fdsml import distributed
from fdsml.config import closest_key, parse
from fdsml.errors import UserFixableError

if TYPE_CHECKING:
    from fdsml.data.retrieval_datasets import ImageRecords, RetrievalSplits

logger = logging.getLogger(__name__)


class RunCheckError(UserFixableError, ValueError):
    """A parameter or a dataset folder of the run is wrong, found before its first node.

    ``kind`` names what was found (``ConfigError``, ``DatasetLayoutError``) when every problem is of
    one kind, so the console says the same as when the node itself raised it.
    """

    def __init__(self, message: str, kind: str = "RunCheckError"):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class RunInputs:
    """What a section's check may need beyond the section: every section of the run, and the pre-trained model
    file (the catalog's ``pretrained_model``) when it is on disk and this run does not write it."""

    parameters: Mapping[str, Any] = field(default_factory=dict)
    pretrained_model: str | None = None


def _check_images(title: str, parts: Mapping[str, ImageRecords | None], scored: tuple[str, ...], protocol_keeps: bool) -> None:
    """Every listed image decodes, and none of the ``scored`` parts' has a pixel-identical copy among the parts."""
    from fdsml.data.leaks import check_no_leaks

    present = {name: records for name, records in parts.items() if records is not None}
    check_no_leaks(title, present, scored, protocol_keeps=protocol_keeps)


def _check_retrieval_images(splits: RetrievalSplits, dataset: str, with_training: bool = True) -> None:
    """A retrieval dataset's images: its test (or query and gallery) images are scored, its training images may leak."""
    from fdsml.data.retrieval_datasets import protocol_keeps_copies

    parts = {"train": splits.train if with_training else None, "test": splits.test, "query": splits.query, "gallery": splits.gallery}
    _check_images(splits.name, parts, ("test", "query", "gallery"), protocol_keeps_copies(dataset))


def _check_starts(starts: tuple, run: RunInputs) -> None:
    """Each starting point's checkpoint holds the backbone it names: the file's, or the pre-training's of this run."""
    from fdsml.models.checkpoint import load_checkpoint_file
    from fdsml.models.starting_points import PRETRAINED, require_backbone

    for start in starts:
        if start.checkpoint == PRETRAINED and run.pretrained_model is None:
            if "pretrain" in run.parameters:  # the model this run (or the pretrain pipeline run first) writes
                held = PARSERS["pretrain"](run.parameters["pretrain"]).model.backbone
                require_backbone(start, held, "the pre-training (pretrain.model.backbone)")
        elif start.checkpoint is not None:
            path = run.pretrained_model if start.checkpoint == PRETRAINED else start.checkpoint
            require_backbone(start, load_checkpoint_file(path)["model"]["name"], path)


def _world_size() -> int:
    return distributed.current().world_size


def _check_pretrain(params: Any, run: RunInputs) -> None:
    from fdsml.data import read_retrieval_dataset
    from fdsml.training.pretrain import plan_pretrain, pretraining_rows

    config = PARSERS["pretrain"](params)
    if "fractals" in run.parameters:  # the plan on the rows fractals.holdout leaves (at most), before they are drawn
        plan_pretrain(config, pretraining_rows(run.parameters["fractals"])[0], _world_size()).check()
    validation = config.validation
    if validation.enabled and validation.probe is not None:
        probe = read_retrieval_dataset(validation.probe.dataset, validation.probe.root)  # the probe's folder and layout
        _check_retrieval_images(probe, validation.probe.dataset, with_training=False)  # the probe scores a frozen trunk


def _check_retrieval(params: Any, run: RunInputs) -> None:
    from fdsml.training.retrieval import load_splits
    from fdsml.training.retrieval_comparison import check_recipe_fits

    config = PARSERS["retrieval"](params)
    splits = load_splits(config)  # the folder, its layout, and Recall@K against what a query searches
    check_recipe_fits(config, splits, _world_size())  # the plan, the test queries, the rate search's split
    _check_starts(config.starts, run)
    _check_retrieval_images(splits, config.data.dataset)
    _say_lone_queries(splits)


def _say_lone_queries(splits: RetrievalSplits) -> None:
    """A query with nothing of its class to find is left out of the scores: said before work, not refused."""
    note = splits.lone_queries_note()
    if note:
        logger.warning("%s", note)


def _check_classification(params: Any, run: RunInputs) -> None:
    from dataclasses import replace

    from fdsml.data.classification_datasets import classification_keeps_copies, read_classification_dataset
    from fdsml.training.classification_comparison import check_recipe_fits

    config = PARSERS["classification"](params)
    _check_starts(config.starting_points, run)
    errors = []
    for dataset in config.datasets:  # every dataset's problem at once (conf/paper lists seven)
        try:
            splits = read_classification_dataset(dataset.name, dataset.root, seed=config.train.seed)
            check_recipe_fits(replace(config, datasets=(dataset,)), {dataset.name: splits}, _world_size())
            _check_images(splits.name, {"train": splits.train, "test": splits.test}, ("test",), classification_keeps_copies(dataset.name))
        except UserFixableError as error:
            errors.append(error)
    if errors:
        raise ExceptionGroup("classification datasets", errors)


def _parse_fractals(params: Any) -> Any:
    from fdsml.data.fractals_config import parse_fractals_params
    from fdsml.families import check_every_block

    check_every_block(params)  # the blocks of the families not selected too
    return parse_fractals_params(params)


def _parse_tune(params: Any) -> Any:
    from fdsml.training.pretrain import PretrainConfig
    from fdsml.tuning.config import parse_tune_params

    config = parse_tune_params(params)  # its space against pretrain and retrieval: by the study
    for name, arm in config.arms.items():  # each arm's pretrain keys, on the defaults: a misspelt one never reaches a trial
        parse(PretrainConfig, arm.pretrain, f"tune.arms.{name}.pretrain")
    return config


def _parser(module: str, name: str) -> Callable[[Any], Any]:
    """``module.name``, imported when first called: a run loads only what its sections need."""

    def parse_section(params: Any) -> Any:
        return getattr(importlib.import_module(module), name)(params)

    return parse_section


PARSERS: dict[str, Callable[[Any], Any]] = {
    "fractals": _parse_fractals,
    "pretrain": _parser("fdsml.training.pretrain", "parse_pretrain_params"),
    "validate_descriptor": _parser("fdsml.descriptor_validation.measure", "parse_validate_descriptor_params"),
    "retrieval": _parser("fdsml.training.retrieval", "parse_retrieval_params"),
    "classification": _parser("fdsml.training.classification", "parse_classification_params"),
    "robustness": _parser("fdsml.evaluation.robustness", "parse_robustness_params"),  # its dataset is classification's
    "analysis": _parser("fdsml.analysis.config", "parse_analysis_params"),
    "export": _parser("fdsml.models.export", "parse_export_params"),
    "tune": _parse_tune,
    "plan": _parser("fdsml.training.training_plan", "parse_plan_params"),
    "study": _parser("fdsml.pipelines.study.checks", "check_study_params"),  # the study file it names, arms and all
}
"""Every known parameter section and its parser: a key outside them, at any depth, is refused before work."""


def _parsed(parse_section: Callable[[Any], Any]) -> Callable[[Any, RunInputs], None]:
    def check(params: Any, run: RunInputs) -> None:
        parse_section(params)

    return check


CHECKS: dict[str, Callable[[Any, RunInputs], None]] = {key: _parsed(parse_section) for key, parse_section in PARSERS.items()} | {
    "pretrain": _check_pretrain,
    "retrieval": _check_retrieval,
    "classification": _check_classification,
}
"""What a ``params:<key>`` a pipeline reads is checked with: its parser, then the folders, images and checkpoints it names."""


def unknown_sections(parameters: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A problem for each top-level key of ``parameters`` that is no known section, naming the closest one."""
    problems = []
    for key in sorted(set(parameters) - set(PARSERS)):
        guess = closest_key(key, PARSERS)
        below = ".".join(_first_path(parameters[key]))
        meant = f"; did you mean {'.'.join(filter(None, (guess, below)))}?" if guess else ""
        problems.append(
            ("ConfigError", f"{key}: unknown parameter section{meant} Known sections: {', '.join(sorted(PARSERS))}")
        )
    return problems


def _first_path(value: Any) -> list[str]:
    """The keys down to the first leaf of a nested mapping (``{"train": {"max_steps": 6}}``: train, max_steps)."""
    path = []
    while isinstance(value, Mapping) and value:
        key = next(iter(value))
        path.append(str(key))
        value = value[key]
    return path


def _problems(check: Callable[[], Any]) -> list[tuple[str, str]]:
    """The kind and message of each user-fixable error ``check`` raises (several: an ExceptionGroup of them)."""
    found = []
    try:
        check()
    except* UserFixableError as group:
        found = [(type(error).__name__, str(error)) for error in group.exceptions]
    return found


def problems_of(key: str, params: Any, run: RunInputs | None = None) -> list[tuple[str, str]]:
    """What is wrong with ``params:<key>`` or what it names (empty when nothing is)."""
    return _problems(lambda: CHECKS[key](params, run or RunInputs()))


def check_run(parameters: Mapping[str, Any], reads: set[str] | None = None, pretrained_model: str | None = None) -> None:
    """Check every section of ``parameters``: an unknown section, or an unknown key at any depth, stops the run. The
    sections in ``reads`` (all when None) are checked in full, with the folders, images and checkpoints they name;
    the others are parsed. Every replica raises the same :class:`RunCheckError` when any replica found a problem."""
    run = RunInputs(parameters, pretrained_model)
    problems = unknown_sections(parameters)
    for key in (key for key in PARSERS if key in parameters):
        if reads is None or key in reads:
            problems += problems_of(key, parameters[key], run)
        else:
            problems += _problems(lambda key=key: PARSERS[key](parameters[key]))
    context = distributed.current()
    seen = distributed.from_every_rank(problems, context)
    if not any(seen):
        return
    ranks: dict[str, list[int]] = {}
    for rank, found in enumerate(seen):
        for _, problem in found:
            where = ranks.setdefault(problem, [])
            where += [rank] if rank not in where else []  # two sections may find the same (the probe's folder is retrieval's)
    lines = [
        problem if len(where) == context.world_size else f"{problem} (rank {', '.join(map(str, where))})"
        for problem, where in ranks.items()
    ]
    kinds = {kind for found in seen for kind, _ in found}
    raise RunCheckError("; ".join(lines), kinds.pop() if len(kinds) == 1 else "RunCheckError")
