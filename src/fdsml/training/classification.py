"""Classification fine-tuning (METHOD.md section 5): settings, objectives, and the assembly for the loop.

Every starting point (scratch, FDSL or FDSML checkpoints) gets the same recipe: the trunk from
its checkpoint, a fresh linear classifier, cross-entropy with label smoothing, optionally mixup
or cutmix, AdamW with warm-up and cosine decay by default. Training runs a fixed number of
steps and the last weights are scored once on the test split: no model selection on it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from fdsml.config import ConfigError, digest, parse, require_fraction, require_positive, require_range
from fdsml.data import ImageRecords, ShuffledBatchSampler
from fdsml.data.classification_datasets import (
    ClassificationSplits,
    available_classification_datasets,
    read_classification_dataset,
)
from fdsml.errors import MissingInputError
from fdsml.models import model_from_payload, model_payload
from fdsml.models.backbones import MODEL_REGISTRY
from fdsml.models.starting_points import PRETRAINED, StartingPoint, build_from_start
from fdsml.training import distributed
from fdsml.training.loop import LoopConfig, OptimizerConfig, train
from fdsml.training.objectives import CrossEntropyObjective

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetSettings:
    """A registered classification dataset and its folder (``digits`` needs none)."""

    name: str = "digits"
    root: str | None = None

    def __post_init__(self):
        if self.name not in available_classification_datasets():
            known = ", ".join(available_classification_datasets())
            raise ConfigError(f"name: unknown dataset {self.name!r}; choose one of {known}")


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

    datasets: tuple[DatasetSettings, ...] = (DatasetSettings(),)
    starting_points: tuple[StartingPoint, ...] = (StartingPoint("scratch"),)
    image_size: int = 32
    batch_size: int = 64
    eval_batch_size: int = 256
    label_smoothing: float = 0.1
    augment: AugmentSettings = field(default_factory=AugmentSettings)
    mixup: MixupSettings = field(default_factory=MixupSettings)
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(
            name="adamw", base_lr=1e-3, reference_batch=64, weight_decay=0.05, schedule="warmup_cosine", warmup_steps=10
        )
    )
    train: LoopConfig = field(default_factory=LoopConfig)
    run_dir: str = "data/06_models/classification_run"

    def __post_init__(self):
        for key in ("image_size", "batch_size", "eval_batch_size"):
            require_positive(key, getattr(self, key))
        require_fraction("label_smoothing", self.label_smoothing)
        if not self.datasets or not self.starting_points:
            raise ConfigError("datasets, starting_points: give at least one of each")
        names_of = {"datasets": [d.name for d in self.datasets], "starting_points": [s.name for s in self.starting_points]}
        for key, names in names_of.items():
            if len(set(names)) != len(names):
                raise ConfigError(f"{key}: names must be unique, got {names}")
        for index, start in enumerate(self.starting_points):
            if start.backbone not in MODEL_REGISTRY:
                raise ConfigError(
                    f"starting_points[{index}].backbone: unknown backbone {start.backbone!r}; "
                    f"choose one of {', '.join(sorted(MODEL_REGISTRY))}"
                )


def parse_classification_params(params: dict[str, Any]) -> ClassificationConfig:
    """Validate ``params:classification``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(ClassificationConfig, params, "classification")


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

    Each step's mixing is drawn from a generator seeded by (seed, step): reproducible, and the
    same after a resume.
    """

    def __init__(self, num_classes: int, settings: MixupSettings, *, label_smoothing: float = 0.0, seed: int = 0):
        super().__init__()
        self.num_classes = num_classes
        self.settings = settings
        self.label_smoothing = label_smoothing
        self.seed = seed

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        rng = np.random.default_rng([self.seed, step])
        targets = smooth_one_hot(batch["label"], self.num_classes, self.label_smoothing)
        images, targets = mix_batch(batch["image"], targets, self.settings, rng)
        logits = model(images).float()
        loss = torch.sum(-targets * F.log_softmax(logits, dim=1), dim=1).mean()
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


def _file_digest(path: str | None) -> str:
    if path is None:
        return ""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def run_fingerprint(
    config: ClassificationConfig, dataset: dict[str, Any], start: StartingPoint, pretrained: dict | None = None
) -> str:
    """What a resumable fine-tuning run must share with the checkpoint it resumes (the start's weights included)."""
    definition = {k: v for k, v in asdict(config).items() if k not in ("datasets", "starting_points", "run_dir")}
    definition["train"] = {k: v for k, v in definition["train"].items() if k in ("epochs", "max_steps", "seed")}
    if start.checkpoint == PRETRAINED:
        weights = (pretrained or {}).get("metadata", {}).get("run_fingerprint", "")
    else:
        weights = _file_digest(start.checkpoint)
    definition |= {"dataset": dataset, "start": asdict(start), "start_weights": weights}
    return digest(definition)


def finetune_classifier(
    splits: ClassificationSplits,
    start: StartingPoint,
    config: ClassificationConfig,
    *,
    dataset: DatasetSettings | None = None,
    pretrained: dict | None = None,
) -> tuple[dict, pd.DataFrame]:
    """Fine-tune ``start`` on ``splits.train``; returns the model file payload and the per-step history.

    ``pretrained`` is the pre-training pipeline's model file, used by starts whose checkpoint is
    ``pretrained_model``.

    ``dataset`` (where the splits were read from) enters the run's fingerprint, so a checkpoint
    left by another dataset of the same name is never resumed.
    """
    from fdsml.data import ImageRecordsDataset

    context = distributed.setup(config.train.device)
    images = ImageRecordsDataset(splits.train, train_transform(config), seed=config.train.seed)
    sampler = ShuffledBatchSampler(
        len(images), config.batch_size, seed=config.train.seed, num_replicas=context.world_size, rank=context.rank
    )
    model = build_from_start(
        start,
        payload=pretrained if start.checkpoint == PRETRAINED else None,
        seed=config.train.seed,
        img_size=config.image_size,
        head="classifier",
        num_classes=splits.num_classes,
    )
    objective = build_classification_objective(config, splits.num_classes)
    fingerprint = run_fingerprint(config, asdict(dataset) if dataset else {"name": splits.name}, start, pretrained)
    result = train(
        model,
        objective,
        images,
        sampler,
        config.train,
        config.optimizer,
        Path(config.run_dir) / splits.name / start.name / "last.pt",
        fingerprint=fingerprint,
    )
    payload = model_payload(
        result.model,
        dataset=splits.name,
        start=start.name,
        start_checkpoint=start.checkpoint,
        num_classes=splits.num_classes,
        image_size=config.image_size,
        crop_fraction=config.augment.crop_fraction,
        steps=result.steps,
        run_fingerprint=fingerprint,
    )
    return payload, result.history.assign(dataset=splits.name, start=start.name)


def evaluate_classifier(model: nn.Module, records: ImageRecords, config: ClassificationConfig) -> dict[str, float]:
    """``{"top1", "top5"}`` of ``model`` on ``records`` through the test view."""
    return score_records(
        model, records, config.image_size, config.augment.crop_fraction, config.eval_batch_size, config.train.device
    )


def score_records(
    model: nn.Module, records: ImageRecords, image_size: int, crop_fraction: float, batch_size: int, device: str = "auto"
) -> dict[str, float]:
    """``{"top1", "top5"}`` of ``model`` on ``records`` seen at ``image_size`` through the test view."""
    from fdsml.data import ImageRecordsDataset
    from fdsml.evaluation.classification import classification_metrics

    dataset = ImageRecordsDataset(records, eval_transform(image_size, crop_fraction))
    return classification_metrics(model, dataset, batch_size=batch_size, device=distributed.resolve_device(device))


def run_classification(
    config: ClassificationConfig, pretrained: dict | None = None
) -> tuple[dict[str, dict], dict[str, Any], pd.DataFrame]:
    """Fine-tune every starting point on every dataset and score each once on the test split.

    Returns ``(models, metrics, history)``: ``models[f"{dataset}/{start}"]`` is a model payload,
    ``metrics[dataset][start] = {"top1", "top5", "steps"}``, and the histories stacked.
    """
    check_starting_points(config.starting_points)
    models, metrics, histories = {}, {}, []
    for dataset in config.datasets:
        splits = read_classification_dataset(dataset.name, dataset.root, seed=config.train.seed)
        metrics[dataset.name] = {}
        for start in config.starting_points:
            logger.info("Fine-tuning %s on %s", start.name, dataset.name)
            payload, history = finetune_classifier(splits, start, config, dataset=dataset, pretrained=pretrained)
            scores = evaluate_classifier(model_from_payload(payload), splits.test, config)
            logger.info("%s on %s: top-1 %.4f, top-5 %.4f", start.name, dataset.name, scores["top1"], scores["top5"])
            models[f"{dataset.name}/{start.name}"] = payload
            metrics[dataset.name][start.name] = {**scores, "steps": payload["metadata"]["steps"]}
            histories.append(history)
    return models, metrics, pd.concat(histories, ignore_index=True)


def metrics_table(metrics: dict[str, dict[str, dict[str, float]]]) -> str:
    """A Markdown table: one row per starting point, top-1 / top-5 (%) per dataset."""
    datasets = list(metrics)
    starts = list(dict.fromkeys(s for d in datasets for s in metrics[d]))
    header = "| starting point | " + " | ".join(f"{d} top-1 | {d} top-5" for d in datasets) + " |"
    rule = "|---|" + "---:|---:|" * len(datasets)
    rows = []
    for start in starts:
        cells = []
        for d in datasets:
            scores = metrics[d].get(start)
            cells += [f"{100 * scores['top1']:.2f}", f"{100 * scores['top5']:.2f}"] if scores else ["", ""]
        rows.append(f"| {start} | " + " | ".join(cells) + " |")
    return "\n".join([header, rule, *rows]) + "\n"
