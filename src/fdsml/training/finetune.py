"""Fine-tuning, assembled once for every downstream task (retrieval, classification).

A task gives only what differs (:class:`FineTuning`): its configuration, the head put on the
starting point's trunk, its objective, its training view of the images and its plan. The
assembly does the rest alike for every task and run (:func:`finetune`): the trunk of the run's
starting point under that head, the shuffled training batches, the run's fingerprint
(:func:`~fdsml.training.run_folders.run_fingerprint`), its folder under ``run_dir``, and the
loop, which resumes a stopped run of the same fingerprint and reuses a finished one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch import nn

from fdsml import distributed
from fdsml.data import ImageRecords, ImageRecordsDataset, ImageTransform, ShuffledBatchSampler
from fdsml.models.starting_points import StartingPoint, build_from_start, start_payload, trunk_digest
from fdsml.training.live import LiveRun
from fdsml.training.loop import TrainResult, train
from fdsml.training.training_plan import TrainingPlan
from fdsml.training.run_folders import RunDefinition, run_fingerprint


@dataclass(frozen=True)
class FineTuning:
    """What a task gives the assembly.

    ``key`` names the task's configuration in a run's fingerprint (``retrieval``), ``code`` its
    module and its dataset reader's (:mod:`fdsml.plugins`); ``config`` is its parsed configuration (``train``, ``optimizer``, ``run_dir``).
    ``head`` holds the ``build_model`` keywords of the head put on every trunk, ``model_overrides``
    the model settings a starting point's own overrides replace. ``objective`` gives the loss of
    a run's seed, ``training_view`` the transform of the training images, ``plan`` the
    (unchecked) plan of a number of training images at a world size.
    """

    key: str
    code: tuple[str, ...]
    config: Any
    image_size: int
    head: dict[str, Any]
    objective: Callable[[int], nn.Module]
    training_view: Callable[[], ImageTransform]
    plan: Callable[[int, int], TrainingPlan]
    model_overrides: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FineTuneRun:
    """One run of a task's sweep: its starting point and seed, its folder under ``run_dir`` (also its
    live metrics' prefix), and what defines it beyond the task's configuration (``defines``)."""

    start: StartingPoint
    seed: int
    folder: str
    defines: dict[str, Any]


def defining_run(task: FineTuning, run: FineTuneRun, start_weights: str, training_images: str) -> RunDefinition:
    """What defines one fine-tuning run, for its fingerprint: the task's configuration with what this run
    adds, the content of the trunk it starts from and of the training split's listing
    (``training_images``: :meth:`~fdsml.data.ImageRecords.listing_digest`, not the folder's path), and the task's code."""
    inputs = {"start_weights": start_weights, "training_images": training_images}
    return RunDefinition({task.key: task.config, **run.defines}, code=task.code, inputs=inputs)


def defining_start(start: StartingPoint) -> StartingPoint:
    """``start`` as it defines a run: without its ``base_lr``, which the run's configuration holds already
    (:func:`at_start_rate`), so that one rate defines one run whether it was set by hand, chosen or shared."""
    return replace(start, base_lr=None)


def at_start_rate(config: Any, start: StartingPoint) -> Any:
    """A task's configuration with ``start``'s own fine-tuning rate (``start.base_lr``) when it has one."""
    if start.base_lr is None:
        return config
    return replace(config, optimizer=replace(config.optimizer, base_lr=start.base_lr))


def starting_model(task: FineTuning, run: FineTuneRun, payload: dict | None) -> nn.Module:
    """The model a run starts from, before any step: the start's trunk (``payload``: its model file, None from
    scratch, drawn from the run's seed) under the task's fresh head. Its trunk is the run's frozen baseline."""
    start = run.start
    trunk = StartingPoint(start.name, start.checkpoint, start.backbone, task.model_overrides | dict(start.overrides))
    return build_from_start(trunk, payload=payload, seed=run.seed, img_size=task.image_size, **task.head)


def finetune(
    task: FineTuning,
    records: ImageRecords,
    run: FineTuneRun,
    *,
    pretrained: dict | None = None,
    plan: TrainingPlan | None = None,
    live: LiveRun | None = None,
) -> tuple[TrainResult, str]:
    """Fine-tune ``run``'s starting point on ``records``; returns the loop's result and the run's fingerprint.

    ``pretrained`` is the pre-training pipeline's model file, used by starts whose checkpoint is
    ``pretrained_model``. ``plan`` (default: the task's plan of ``records``) is checked.
    ``live`` (main rank only) is given the history rows as they settle.
    """
    config = task.config
    context = distributed.setup(config.train.device)
    plan = plan or task.plan(len(records), context.world_size).check()
    payload = start_payload(run.start, pretrained)
    model = starting_model(task, run, payload)
    dataset = ImageRecordsDataset(records, task.training_view(), seed=run.seed)
    sampler = ShuffledBatchSampler(
        len(dataset), plan.batch_per_replica, seed=run.seed, num_replicas=context.world_size, rank=context.rank
    )
    objective = task.objective(run.seed)
    fingerprint = run_fingerprint(
        defining_run(task, run, trunk_digest(payload), records.listing_digest()), config.train, context, objective
    )
    result = train(
        model,
        objective,
        dataset,
        sampler,
        replace(config.train, seed=run.seed),
        config.optimizer,
        Path(config.run_dir) / run.folder / "last.pt",
        plan=plan,
        fingerprint=fingerprint,
        live=live,
    )
    return result, fingerprint
