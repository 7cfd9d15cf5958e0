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
    """A parameter or a dataset folder of the run is wrong, found before its first node."""


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
    from fdsml.pipelines.fractals.nodes import parse_fractals_params

    parse_fractals_params(params)


CHECKS: dict[str, Callable[[Any], None]] = {
    "fractals": _check_fractals,
    "pretrain": _check_pretrain,
    "retrieval": _check_retrieval,
    "classification": _check_classification,
}
"""What each ``params:<key>`` a pipeline reads is checked with: its parser, then the folders it names."""


def problem_of(key: str, params: Any) -> str | None:
    """The message of what is wrong with ``params:<key>`` or the folders it names; None when nothing is."""
    try:
        CHECKS[key](params)
    except UserFixableError as error:
        return str(error)
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
        for problem in found:
            ranks.setdefault(problem, []).append(rank)
    lines = [
        problem if len(where) == context.world_size else f"{problem} (rank {', '.join(map(str, where))})"
        for problem, where in ranks.items()
    ]
    raise RunCheckError("; ".join(lines))
