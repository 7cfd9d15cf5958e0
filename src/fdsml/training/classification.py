"""Classification fine-tuning (docs/method.md §5.4): settings, objectives, and its part of the fine-tuning assembly.

Every starting point (scratch, FDSL or FDSML checkpoints) gets the same recipe, at its own rate when
it has one (its ``base_lr``, or the rate search's: :mod:`fdsml.training.classification_comparison`): the
trunk from its checkpoint, a fresh linear classifier, cross-entropy with label smoothing, optionally mixup
or cutmix, AdamW with warm-up and cosine decay by default. Training runs a fixed number of
steps and the last weights are scored once on the test split: no model selection on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from fdsml import fingerprints
from fdsml.config import ConfigError, parse, require_fraction, require_non_negative, require_positive, require_range
from fdsml.data import ImageRecords
from fdsml.data.classification_datasets import (
    ClassificationSplits,
    available_classification_datasets,
    classification_reader_module,
    read_classification_dataset,
)
from fdsml.errors import MissingInputError
from fdsml.models import model_from_payload, model_payload
from fdsml.seeds import replica_rank, step_seed
from fdsml.models.starting_points import PRETRAINED, StartingPoint, check_start_settings, recorded_start, start_payload, trunk_digest
from fdsml import distributed
from fdsml.training.comparison import BaselineSettings, rate_key, rate_record
from fdsml.training.finetune import FineTuneRun, FineTuning, at_start_rate, defining_start, finetune
from fdsml.training.live import LiveRun, live_metrics
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.objectives import CrossEntropyObjective, soft_target_cross_entropy
from fdsml.training.rate_search import RateSearchSettings
from fdsml.training.training_plan import PlanKeys, TrainingPlan, check_plans, plan_training

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetSettings:
    """A registered classification dataset, its folder (``digits`` needs none) and its own batch size.

    ``batch_size`` (per replica; null: ``classification.batch_size``) lets a small dataset take
    small batches, so it still gets enough steps, and every replica a batch, on many GPUs.
    """

    name: str = "digits"
    root: str | None = fingerprints.non_defining(default=None)  # where: the training split's listing enters by content
    batch_size: int | None = None

    def __post_init__(self):
        if self.name not in available_classification_datasets():
            known = ", ".join(available_classification_datasets())
            raise ConfigError(f"name: unknown dataset {self.name!r}; choose one of {known}")
        if self.batch_size is not None:
            require_positive("batch_size", self.batch_size)


@dataclass(frozen=True)
class AugmentSettings:
    """Training view: random resized crop and flip (``random_crop``), or the test view. Test view: resize, centre crop."""

    random_crop: bool = True
    area_range: tuple[float, float] = (0.08, 1.0)
    ratio_range: tuple[float, float] = (3 / 4, 4 / 3)
    crop_fraction: float = 0.875

    def __post_init__(self):
        require_range("area_range", self.area_range, within=(1e-6, 1.0))
        require_range("ratio_range", self.ratio_range)
        require_fraction("crop_fraction", self.crop_fraction, inclusive_zero=False)


@dataclass(frozen=True)
class MixupSettings:
    """Mixup (``mixup_alpha`` > 0) and/or cutmix (``cutmix_alpha`` > 0) on a fraction ``prob`` of batches.

    With both on, a batch uses cutmix with probability ``switch_prob``. 0 and 0 turns both off.
    """

    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    prob: float = 1.0
    switch_prob: float = 0.5

    def __post_init__(self):
        if self.mixup_alpha < 0 or self.cutmix_alpha < 0:
            raise ConfigError(f"mixup_alpha, cutmix_alpha: must be >= 0, got {self.mixup_alpha}, {self.cutmix_alpha}")
        require_fraction("prob", self.prob)
        require_fraction("switch_prob", self.switch_prob)

    @property
    def enabled(self) -> bool:
        return self.prob > 0 and (self.mixup_alpha > 0 or self.cutmix_alpha > 0)


@dataclass(frozen=True)
class ClassificationConfig:
    """``params:classification``: which datasets and starting points, and the fine-tuning recipe."""

    # Sweeps: each run's own dataset and starting point enter its fingerprint, not the whole lists.
    datasets: tuple[DatasetSettings, ...] = fingerprints.non_defining(default=(DatasetSettings(),))
    starting_points: tuple[StartingPoint, ...] = fingerprints.non_defining(default=(StartingPoint("scratch"),))
    image_size: int = 32
    batch_size: int = 64
    eval_batch_size: int = fingerprints.non_defining(default=256)  # evaluation only: not part of a run's fingerprint
    eval_workers: int = fingerprints.non_defining(default=0)  # DataLoader processes loading the test images
    label_smoothing: float = 0.1
    augment: AugmentSettings = field(default_factory=AugmentSettings)
    mixup: MixupSettings = field(default_factory=MixupSettings)
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(
            name="adamw", base_lr=1e-3, reference_batch=64, weight_decay=0.05, schedule="warmup_cosine", warmup_fraction=0.05
        )
    )
    train: LoopConfig = field(default_factory=LoopConfig)
    # Which rate each start fine-tunes at enters its run through the start's base_lr; the search's settings do not.
    rate_search: RateSearchSettings | None = fingerprints.non_defining(default=None)
    baselines: BaselineSettings = fingerprints.non_defining(default_factory=BaselineSettings)
    run_dir: str = fingerprints.non_defining(default="data/06_models/classification_run")
    live_dir: str | None = fingerprints.non_defining(default=None)

    def __post_init__(self):
        for key in ("image_size", "batch_size", "eval_batch_size"):
            require_positive(key, getattr(self, key))
        require_non_negative("eval_workers", self.eval_workers)
        require_fraction("label_smoothing", self.label_smoothing)
        if not self.datasets or not self.starting_points:
            raise ConfigError("datasets, starting_points: give at least one of each")
        names_of = {"datasets": [d.name for d in self.datasets], "starting_points": [s.name for s in self.starting_points]}
        for key, names in names_of.items():
            if len(set(names)) != len(names):
                raise ConfigError(f"{key}: names must be unique, got {names}")
        check_start_settings(self.starting_points, "starting_points")

    def plugin_modules(self) -> tuple[str, ...]:
        """The modules of the readers of the datasets classification fine-tunes on (:mod:`fdsml.plugins`)."""
        return tuple(sorted({classification_reader_module(dataset.name) for dataset in self.datasets}))


def parse_classification_params(params: dict[str, Any]) -> ClassificationConfig:
    """Validate ``params:classification``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(ClassificationConfig, params, "classification")


def plan_classification(config: ClassificationConfig, name: str, images: int, world_size: int) -> TrainingPlan:
    """The fine-tuning plan of every starting point on dataset ``name``'s ``images`` training images (unchecked).

    The batch is the dataset's own ``batch_size`` when its entry in ``datasets`` gives one.
    """
    index = next((i for i, dataset in enumerate(config.datasets) if dataset.name == name), None)
    own = None if index is None else config.datasets[index].batch_size
    return plan_training(
        f"classification/{name}",
        images=images,
        batch_per_replica=own or config.batch_size,
        world_size=world_size,
        optimizer=config.optimizer,
        loop=config.train,
        keys=PlanKeys(
            batch="classification.batch_size" if own is None else f"classification.datasets[{index}].batch_size",
            warmup="classification.optimizer.warmup_steps",
        ),
    )


def check_starting_points(starts: tuple[StartingPoint, ...]) -> None:
    """Fail before any training when a starting point's checkpoint is missing."""
    for start in starts:
        if start.checkpoint not in (None, PRETRAINED) and not Path(start.checkpoint).is_file():
            raise MissingInputError(
                f"starting point {start.name!r}: no checkpoint at {start.checkpoint}; run the pre-training pipeline first "
                "(kedro run --pipelines=pretrain) or remove this starting point"
            )


# --- objectives ------------------------------------------------------------------------------


def smooth_one_hot(labels: torch.Tensor, num_classes: int, smoothing: float) -> torch.Tensor:
    """(1 - smoothing) one-hot + smoothing / C: the targets ``F.cross_entropy(label_smoothing=...)`` uses."""
    return F.one_hot(labels, num_classes).float() * (1.0 - smoothing) + smoothing / num_classes


def mix_batch(
    images: torch.Tensor, targets: torch.Tensor, settings: MixupSettings, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixup or cutmix of a batch with its reverse (image i with image B-1-i); soft targets mixed alike.

    Mixup: ``lam x_i + (1 - lam) x_j`` with ``lam ~ Beta(a, a)``. Cutmix: a box covering about
    ``1 - lam`` of the image is pasted from ``x_j`` (clipped at the border), and ``lam`` becomes
    the fraction of the image left unpasted, so targets weigh exactly what is visible.
    """
    if not settings.enabled or rng.random() >= settings.prob:
        return images, targets
    cutmix = settings.cutmix_alpha > 0 and (settings.mixup_alpha == 0 or rng.random() < settings.switch_prob)
    alpha = settings.cutmix_alpha if cutmix else settings.mixup_alpha
    lam = float(rng.beta(alpha, alpha))
    partner = images.flip(0)
    if cutmix:
        height, width = images.shape[-2:]
        cut = np.sqrt(1.0 - lam)
        centre_y, centre_x = int(rng.integers(height)), int(rng.integers(width))
        half_h, half_w = int(height * cut) // 2, int(width * cut) // 2
        top, bottom = max(centre_y - half_h, 0), min(centre_y + half_h, height)
        left, right = max(centre_x - half_w, 0), min(centre_x + half_w, width)
        images = images.clone()
        images[..., top:bottom, left:right] = partner[..., top:bottom, left:right]
        lam = 1.0 - (bottom - top) * (right - left) / (height * width)
    else:
        images = lam * images + (1.0 - lam) * partner
    return images, lam * targets + (1.0 - lam) * targets.flip(0)


class MixupObjective(nn.Module):
    """Cross-entropy against soft targets: label-smoothed one-hot, mixed by :func:`mix_batch`.

    Each step's mixing is drawn from a generator seeded by (seed, step, rank): reproducible, the
    same after a resume, and its own on every DDP replica.
    """

    def __init__(self, num_classes: int, settings: MixupSettings, *, label_smoothing: float = 0.0, seed: int = 0):
        super().__init__()
        self.num_classes = num_classes
        self.settings = settings
        self.label_smoothing = label_smoothing
        self.seed = seed

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        rng = np.random.default_rng(step_seed(self.seed, step, replica_rank()))
        targets = smooth_one_hot(batch["label"], self.num_classes, self.label_smoothing)
        images, targets = mix_batch(batch["image"], targets, self.settings, rng)
        logits = model(images)
        loss = soft_target_cross_entropy(logits, targets)
        accuracy = (logits.detach().argmax(dim=1) == targets.argmax(dim=1)).float().mean()
        return loss, {"accuracy": accuracy}

    def param_groups(self) -> list[dict]:
        return []


def build_classification_objective(config: ClassificationConfig, num_classes: int) -> nn.Module:
    """Plain (label-smoothed) cross-entropy, or its soft-target form when mixup / cutmix is on."""
    if config.mixup.enabled:
        return MixupObjective(num_classes, config.mixup, label_smoothing=config.label_smoothing, seed=config.train.seed)
    return CrossEntropyObjective(config.label_smoothing)


# --- fine-tuning and scoring -------------------------------------------------------------------


def train_transform(config: ClassificationConfig):
    from fdsml.data import ImageTransform

    augment = config.augment
    return ImageTransform(
        config.image_size,
        train=augment.random_crop,
        crop_fraction=augment.crop_fraction,
        area_range=augment.area_range,
        ratio_range=augment.ratio_range,
    )


def eval_transform(image_size: int, crop_fraction: float):
    from fdsml.data import ImageTransform

    return ImageTransform(image_size, train=False, crop_fraction=crop_fraction)


def fine_tuning(config: ClassificationConfig, name: str, num_classes: int, read_by: tuple[str, ...] = ()) -> FineTuning:
    """Classification's part of the fine-tuning assembly on dataset ``name``: a linear classifier over its
    ``num_classes`` classes, (label-smoothed, mixed) cross-entropy, and the augmented training view. ``read_by``:
    the module of the reader that read the dataset (none for splits made by hand), part of the run's code."""
    return FineTuning(
        key="classification",
        code=(__name__, *read_by),
        config=config,
        image_size=config.image_size,
        head={"head": "classifier", "num_classes": num_classes},
        objective=lambda seed: build_classification_objective(config, num_classes),
        training_view=lambda: train_transform(config),
        plan=lambda images, world_size: plan_classification(config, name, images, world_size),
    )


def finetune_run(config: ClassificationConfig, name: str, start: StartingPoint, dataset: Any = None) -> FineTuneRun:
    """The run of ``start`` on dataset ``name`` (``dataset``: where it was read from; default its name alone),
    with the training seed: its folder ``<dataset>/<start>``; its dataset and start (its rate is the configuration's)
    define it."""
    defines = {"dataset": dataset or {"name": name}, "start": defining_start(start)}
    return FineTuneRun(start, config.train.seed, f"{name}/{start.name}", defines)


def finetune_classifier(
    splits: ClassificationSplits,
    start: StartingPoint,
    config: ClassificationConfig,
    *,
    dataset: DatasetSettings | None = None,
    pretrained: dict | None = None,
    plan: TrainingPlan | None = None,
    live: LiveRun | None = None,
    run: FineTuneRun | None = None,
) -> tuple[dict, pd.DataFrame]:
    """Fine-tune ``start`` on ``splits.train`` at its own rate; returns the model file payload and the per-step history.

    ``pretrained`` is the pre-training pipeline's model file, used by starts whose checkpoint is
    ``pretrained_model``.

    ``dataset`` (where the splits were read from) enters the run's fingerprint, so a checkpoint
    left by another dataset of the same name is never resumed, and so does its reader's code. ``plan`` (default: planned here)
    is the checked plan of ``splits.train``. ``live`` (main rank only) is given the history rows as they settle.
    ``run`` replaces the start's own run (:func:`finetune_run`): a rate search's runs live in folders of their own.
    """
    read_by = (classification_reader_module(dataset.name),) if dataset is not None else ()
    task = fine_tuning(at_start_rate(config, start), splits.name, splits.num_classes, read_by)
    run = run or finetune_run(config, splits.name, start, dataset)
    result, fingerprint = finetune(task, splits.train, run, pretrained=pretrained, plan=plan, live=live)
    payload = model_payload(
        result.model,
        dataset=splits.name,
        start=start.name,
        start_checkpoint=start.checkpoint,
        start_trunk_digest=trunk_digest(start_payload(start, pretrained)),  # which trunk its scores belong to
        num_classes=splits.num_classes,
        image_size=config.image_size,
        crop_fraction=config.augment.crop_fraction,
        steps=result.steps,
        run_fingerprint=fingerprint,
    )
    return payload, result.history.assign(dataset=splits.name, start=start.name)


def evaluate_classifier(model: nn.Module, records: ImageRecords, config: ClassificationConfig) -> dict[str, float]:
    """``{"top1", "top5"}`` of ``model`` on ``records`` through the test view (under DDP: shared by the replicas)."""
    return evaluate_classifier_scores(model, records, config)[0]


def evaluate_classifier_scores(
    model: nn.Module, records: ImageRecords, config: ClassificationConfig
) -> tuple[dict[str, float], np.ndarray]:
    """:func:`evaluate_classifier` and each image's top-1 hit, for differences paired over the same images."""
    from fdsml.data import ImageRecordsDataset
    from fdsml.evaluation.classification import classification_scores

    dataset = ImageRecordsDataset(records, eval_transform(config.image_size, config.augment.crop_fraction))
    device = distributed.resolve_device(config.train.device, distributed.current().local_rank)
    return classification_scores(model, dataset, batch_size=config.eval_batch_size, device=device, workers=config.eval_workers)


def rate_source(config: ClassificationConfig, start: StartingPoint) -> str:
    """Where ``start``'s rate comes from: its own ``base_lr`` key, or the task's ``optimizer.base_lr``."""
    return rate_key("classification", "starting_points", config.starting_points, start)


def read_datasets(config: ClassificationConfig) -> dict[str, ClassificationSplits]:
    """Every dataset of ``config`` read, by name."""
    return {d.name: read_classification_dataset(d.name, d.root, seed=config.train.seed) for d in config.datasets}


def start_plans(
    config: ClassificationConfig, read: dict[str, ClassificationSplits], world_size: int
) -> dict[tuple[str, str], TrainingPlan]:
    """Each (dataset, start)'s plan at the start's own rate, unchecked."""
    return {
        (name, start.name): plan_classification(at_start_rate(config, start), name, len(splits.train), world_size)
        for name, splits in read.items()
        for start in config.starting_points
    }


@dataclass(frozen=True)
class ClassifierResult:
    """One start fine-tuned on one dataset: its model file, plan, scores on the test split, each test image's top-1 hit,
    and its history."""

    payload: dict
    plan: TrainingPlan
    scores: dict[str, float]
    hits: np.ndarray
    history: pd.DataFrame


def classify_start(
    config: ClassificationConfig,
    dataset: DatasetSettings,
    splits: ClassificationSplits,
    start: StartingPoint,
    plan: TrainingPlan,
    *,
    pretrained: dict | None = None,
    live=None,
) -> ClassifierResult:
    """Fine-tune ``start`` on ``dataset`` at its own rate and score it once on the test split; its rows and scores go live
    to ``live`` under ``<dataset>/<start>/``."""
    logger.info("Fine-tuning %s on %s", start.name, dataset.name)
    run = f"{dataset.name}/{start.name}/"
    payload, history = finetune_classifier(
        splits, start, config, dataset=dataset, pretrained=pretrained, plan=plan, live=live.run(run) if live is not None else None
    )
    scores, hits = evaluate_classifier_scores(model_from_payload(payload), splits.test, config)
    if live is not None:
        live.final(scores, run)
    logger.info("%s on %s: top-1 %.4f, top-5 %.4f", start.name, dataset.name, scores["top1"], scores["top5"])
    return ClassifierResult(payload, plan, scores, hits, history)


def run_classification(
    config: ClassificationConfig, pretrained: dict | None = None
) -> tuple[dict[str, dict], dict[str, Any], pd.DataFrame]:
    """Fine-tune every starting point on every dataset, each at its own rate, and score each once on the test split.

    Every dataset is read and its plan checked first: an impossible plan stops the run before
    any dataset trains. Returns ``(models, metrics, history)``: ``models[f"{dataset}/{start}"]`` is a model payload,
    ``metrics[dataset][start] = {"top1", "top5", "steps", "rate"}``, and the histories stacked. Each run's
    rows and scores go live to ``live_dir`` under ``<dataset>/<start>/``.
    """
    check_starting_points(config.starting_points)
    context = distributed.setup(config.train.device)
    read = read_datasets(config)
    plans = start_plans(config, read, context.world_size)
    check_plans(list(plans.values()))  # every dataset is planned before any trains
    live = live_metrics(config.live_dir, config, context)
    models, metrics, histories = {}, {}, []
    for dataset in config.datasets:
        metrics[dataset.name] = {}
        for start in config.starting_points:
            plan = plans[dataset.name, start.name]
            result = classify_start(config, dataset, read[dataset.name], start, plan, pretrained=pretrained, live=live)
            models[f"{dataset.name}/{start.name}"] = result.payload
            rate = rate_record(at_start_rate(config, start).optimizer.base_lr, plan, rate_source(config, start))
            metrics[dataset.name][start.name] = {**result.scores, "steps": result.payload["metadata"]["steps"], "rate": rate, **recorded_start(result.payload)}
            histories.append(result.history)
    return models, metrics, pd.concat(histories, ignore_index=True)
