"""Checks a ``kedro run`` makes before its first node, on every replica: each selected pipeline's
parameters, and the presence and layout of every dataset folder it will read.

Under ``torchrun`` each replica checks its own view (dataset folders may sit on node-local
disks), then all replicas compare: when any finds a problem, every replica stops with the same
message, naming the ranks where it differs, before any work is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fdsml.errors import UserFixableError
from fdsml import distributed


class RunCheckError(UserFixableError, ValueError):
    """A parameter or a dataset folder of the run is wrong, found before its first node.

    ``kind`` names what was found (``ConfigError``, ``DatasetLayoutError``) when every problem is of
    one kind, so the console says the same as when the node itself raised it.
    """

    def __init__(self, message: str, kind: str = "RunCheckError"):
        super().__init__(message)
        self.kind = kind


def _check_pretrain(params: Any) -> None:
    from fdsml.data import read_retrieval_dataset
    from fdsml.training.pretrain import parse_pretrain_params

    validation = parse_pretrain_params(params).validation
    if validation.enabled and validation.probe is not None:
        read_retrieval_dataset(validation.probe.dataset, validation.probe.root)  # the probe's folder and layout


def _check_retrieval(params: Any) -> None:
    from fdsml.training.retrieval import load_splits, parse_retrieval_params

    load_splits(parse_retrieval_params(params))


def _check_classification(params: Any) -> None:
    from fdsml.data.classification_datasets import read_classification_dataset
    from fdsml.training.classification import parse_classification_params

    config = parse_classification_params(params)
    for dataset in config.datasets:
        read_classification_dataset(dataset.name, dataset.root, seed=config.train.seed)


def _check_fractals(params: Any) -> None:
    from fdsml.data.fractals_config import parse_fractals_params

    parse_fractals_params(params)


def _check_validate_descriptor(params: Any) -> None:
    from fdsml.pipelines.validate_descriptor.nodes import ValidateDescriptorConfig
    from fdsml.config import parse

    parse(ValidateDescriptorConfig, params, "validate_descriptor")


def _check_robustness(params: Any) -> None:
    from fdsml.evaluation.robustness import parse_robustness_params

    parse_robustness_params(params)  # its dataset is one of classification's, whose folders that check reads


def _check_analysis(params: Any) -> None:
    from fdsml.analysis.config import parse_analysis_params

    parse_analysis_params(params)


def _check_export(params: Any) -> None:
    from fdsml.models.export import parse_export_params

    parse_export_params(params)


def _check_tune(params: Any) -> None:
    from fdsml.tuning import parse_tune_params

    parse_tune_params(params)  # its space against pretrain and retrieval: by the study, before any trial


CHECKS: dict[str, Callable[[Any], None]] = {
    "fractals": _check_fractals,
    "pretrain": _check_pretrain,
    "validate_descriptor": _check_validate_descriptor,
    "retrieval": _check_retrieval,
    "classification": _check_classification,
    "robustness": _check_robustness,
    "analysis": _check_analysis,
    "export": _check_export,
    "tune": _check_tune,
}
"""What each ``params:<key>`` a pipeline reads is checked with: its parser, then the folders it names."""


def problem_of(key: str, params: Any) -> tuple[str, str] | None:
    """The kind and message of what is wrong with ``params:<key>`` or the folders it names; None when nothing is."""
    try:
        CHECKS[key](params)
    except UserFixableError as error:
        return type(error).__name__, str(error)
    return None


def check_run(parameters: dict[str, Any]) -> None:
    """Check every ``params:<key>`` of ``parameters`` that has a check; every replica raises the same
    :class:`RunCheckError` when any replica found a problem."""
    problems = [problem for key in CHECKS if key in parameters if (problem := problem_of(key, parameters[key]))]
    context = distributed.current()
    seen = distributed.from_every_rank(problems, context)
    if not any(seen):
        return
    ranks: dict[str, list[int]] = {}
    for rank, found in enumerate(seen):
        for _, problem in found:
            ranks.setdefault(problem, []).append(rank)
    lines = [
        problem if len(where) == context.world_size else f"{problem} (rank {', '.join(map(str, where))})"
        for problem, where in ranks.items()
    ]
    kinds = {kind for found in seen for kind, _ in found}
    raise RunCheckError("; ".join(lines), kinds.pop() if len(kinds) == 1 else "RunCheckError")
