"""Pre-training on a formula family's dataset (FineFractalDB by default): settings, and the assembly of data, model and objective for the loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from fdsml import reuse
from fdsml.config import ConfigError, parse, require_positive
from fdsml.data import (
    ClassBalancedBatchSampler,
    ExplicitTripletBatchSampler,
    FractalCodesDataset,
    ShardedImagesDataset,
    ShuffledBatchSampler,
    read_retrieval_dataset,
)
from fdsml.data.holdout import HoldoutSettings, HoldoutSplit, TrainingRows, split_table
from fdsml.evaluation.pretrain_validation import PretrainValidation, ValidationSettings
from fdsml.families import FamilySpec
from fdsml.models import build_model, model_payload
from fdsml.models.backbones import MODEL_REGISTRY
from fdsml.training import distributed
from fdsml.training.distributed import DistContext
from fdsml.training.loop import LoopConfig, OptimizerConfig, train
from fdsml.training.objectives import CrossEntropyObjective, PATripletObjective
from fdsml.training.plan import PlanKeys, TrainingPlan, mined_triplets, plan_training


@dataclass(frozen=True)
class PATripletSettings:
    """PA-Triplet: candidate filter, triplet mode and the margin loss (choices the method leaves open)."""

    filter: Literal["all", "each", "same", "diff"] = "same"
    mode: Literal["batch", "explicit"] = "batch"
    margin: float = 0.2
    normalize_embeddings: bool = True
    reducer: Literal["mean", "avg_nonzero"] = "mean"
    max_triplets: int | None = None
    min_relative_gap: float = 0.0

    def __post_init__(self):
        if self.margin < 0:
            raise ConfigError(f"pretrain.pa_triplet.margin: must be >= 0, got {self.margin}")
        if not 0 <= self.min_relative_gap < 1:
            raise ConfigError(f"pretrain.pa_triplet.min_relative_gap: must lie in [0, 1) (0 keeps every triplet), got {self.min_relative_gap}")
        if self.max_triplets is not None:
            require_positive("pretrain.pa_triplet.max_triplets", self.max_triplets)


@dataclass(frozen=True)
class FDSLSettings:
    """The cross-entropy baseline: FractalDB's plain shuffled batches, or PA-Triplet's P x K ones to compare like with like."""

    label_smoothing: float = 0.0
    batches: Literal["shuffled", "class_balanced"] = "shuffled"


@dataclass(frozen=True)
class ModelSettings:
    """A registered backbone and its head sizes (``None`` = the backbone's recipe)."""

    backbone: str = "resnet18"
    embedding_dim: int | None = None
    hidden_dim: int | None = None
    img_size: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.backbone not in MODEL_REGISTRY:
            raise ConfigError(
                f"pretrain.model.backbone: unknown backbone {self.backbone!r}; choose one of {', '.join(sorted(MODEL_REGISTRY))}"
            )


@dataclass(frozen=True)
class DataSettings:
    """Where images come from and how batches are formed."""

    source: Literal["render", "shards"] = "render"
    fresh_noise: bool = True
    instances: Literal["table", "fresh"] = "table"  # fresh: a new instance of the row's class per (seed, epoch, index)
    classes_per_batch: int = 4
    instances_per_class: int = 4
    triplets_per_batch: int = 8
    batches_per_epoch: int | None = None

    def __post_init__(self):
        for key in ("classes_per_batch", "instances_per_class", "triplets_per_batch"):
            require_positive(f"pretrain.data.{key}", getattr(self, key))
        if self.batches_per_epoch is not None:
            require_positive("pretrain.data.batches_per_epoch", self.batches_per_epoch)
        if self.instances == "fresh" and self.source == "shards":
            raise ConfigError(
                "pretrain.data.instances: 'fresh' draws and renders new instances in the loader; "
                "it needs pretrain.data.source: render, not shards"
            )


@dataclass(frozen=True)
class PretrainConfig:
    """``params:pretrain``."""

    objective: Literal["pa_triplet", "fdsl"] = "pa_triplet"
    pa_triplet: PATripletSettings = field(default_factory=PATripletSettings)
    fdsl: FDSLSettings = field(default_factory=FDSLSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    data: DataSettings = field(default_factory=DataSettings)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: LoopConfig = field(default_factory=LoopConfig)
    validation: ValidationSettings = field(default_factory=ValidationSettings)
    run_dir: str = reuse.non_defining(default="data/06_models/pretrain_run")

    def __post_init__(self):
        batch = self.data
        if self.objective == "pa_triplet" and self.pa_triplet.mode == "batch":
            if self.pa_triplet.filter in ("each", "same") and batch.instances_per_class < 3 - (self.pa_triplet.filter == "each"):
                raise ConfigError(
                    f"pretrain.data.instances_per_class: filter {self.pa_triplet.filter!r} needs at least "
                    f"{3 - (self.pa_triplet.filter == 'each')} instances of the anchor's class per batch, "
                    f"got {batch.instances_per_class}"
                )
            if self.pa_triplet.filter in ("each", "diff") and batch.classes_per_batch < 2:
                raise ConfigError(
                    f"pretrain.data.classes_per_batch: filter {self.pa_triplet.filter!r} needs at least 2 classes per batch, "
                    f"got {batch.classes_per_batch}"
                )
        if self.shuffled_batches and batch.batches_per_epoch is not None:
            raise ConfigError(
                "pretrain.data.batches_per_epoch: plain shuffled batches (pretrain.fdsl.batches: shuffled) make one pass "
                "over the images per epoch; set it to null, or use pretrain.fdsl.batches: class_balanced"
            )

    @property
    def shuffled_batches(self) -> bool:
        """FDSL on plain shuffled batches of P x K images (each image once per epoch), not class-balanced ones."""
        return self.objective == "fdsl" and self.fdsl.batches == "shuffled"


def parse_pretrain_params(params: dict[str, Any]) -> PretrainConfig:
    """Validate ``params:pretrain``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(PretrainConfig, params, "pretrain")


def run_fingerprint(
    config: PretrainConfig,
    spec: FamilySpec,
    table: pd.DataFrame,
    world_size: int,
    shards: dict | None = None,
    split: HoldoutSplit | None = None,
) -> str:
    """The run folder's reuse fingerprint (:mod:`fdsml.reuse`): what a resumed or reused run must share.

    The codes table and its held-out split enter by content; materialised shards
    (``data.source: shards``) by the fingerprint the fractals pipeline recorded for them.
    """
    inputs = {"codes": reuse.content_digest(table)}
    if split is not None:
        inputs["split"] = reuse.content_digest({"training": split.training, "heldout": split.heldout})
    if config.data.source == "shards":
        inputs["images"] = (shards or {}).get("fingerprint", "")
    return reuse.fingerprint({"pretrain": config, **spec.defining()}, code=__name__, inputs=inputs, world_size=world_size)


def build_fractal_dataset(
    table: pd.DataFrame, spec: FamilySpec, config: PretrainConfig, shards: dict | None, *, as_stored: bool = False
):
    """Images rendered on the fly through the family (the table's instances, or fresh ones), or read from
    materialised ``shards`` (the stored manifest), at the model's input size. ``as_stored``: the table's
    own instances with their own seeds, as validation reads the held-out rows."""
    img_size = config.model.img_size or spec.size
    if config.data.source == "shards":
        if shards is None:
            raise ConfigError("pretrain.data.source: 'shards' needs the fractals pipeline run with outputs.materialize: true")
        return ShardedImagesDataset(shards["folder"], table, img_size=img_size)
    data = config.data
    return FractalCodesDataset(
        table,
        spec,
        seed=config.train.seed,
        fresh_noise=data.fresh_noise and not as_stored,
        instances="table" if as_stored else data.instances,
        img_size=img_size,
    )


def plan_pretrain(config: PretrainConfig, images: int, world_size: int) -> TrainingPlan:
    """The pre-training plan on ``images`` fractal images (unchecked).

    An epoch is ``data.batches_per_epoch`` global batches, by default about one pass over the
    images and at least one batch per replica: images are rendered afresh each epoch, so a tiny
    dataset still gives every replica a step. Plain shuffled batches (FDSL) make exactly one pass.
    """
    data, explicit = config.data, config.objective == "pa_triplet" and config.pa_triplet.mode == "explicit"
    batch = 3 * data.triplets_per_batch if explicit else data.classes_per_batch * data.instances_per_class
    triplets = None
    if config.objective == "pa_triplet" and not explicit:
        mined = mined_triplets(config.pa_triplet.filter, data.classes_per_batch, data.instances_per_class)
        triplets = (mined, min(mined, config.pa_triplet.max_triplets or mined))
    if data.batches_per_epoch is not None:
        batch_key = "pretrain.data.batches_per_epoch"
    else:
        batch_key = "pretrain.data.triplets_per_batch" if explicit else "pretrain.data.classes_per_batch x instances_per_class"
    return plan_training(
        "pretrain",
        images=images,
        batch_per_replica=batch,
        world_size=world_size,
        optimizer=config.optimizer,
        loop=config.train,
        keys=PlanKeys(batch=batch_key, warmup="pretrain.optimizer.warmup_steps"),
        global_batches_per_epoch=data.batches_per_epoch
        or (images // batch if config.shuffled_batches else max(images // batch, world_size)),
        triplets=triplets,
    )


def build_batch_sampler(labels: np.ndarray, config: PretrainConfig, context: DistContext, plan: TrainingPlan):
    """P x K class-balanced batches, [anchors | first | second] batches in explicit mode, or (FDSL by default)
    plain shuffled batches of P x K images; sharded per rank."""
    data = config.data
    if config.shuffled_batches:
        return ShuffledBatchSampler(
            len(labels),
            data.classes_per_batch * data.instances_per_class,
            seed=config.train.seed,
            num_replicas=context.world_size,
            rank=context.rank,
        )
    common = dict(
        seed=config.train.seed,
        num_replicas=context.world_size,
        rank=context.rank,
        batches_per_epoch=plan.global_batches_per_epoch,
    )
    if config.objective == "pa_triplet" and config.pa_triplet.mode == "explicit":
        return ExplicitTripletBatchSampler(labels, data.triplets_per_batch, config.pa_triplet.filter, **common)
    return ClassBalancedBatchSampler(labels, data.classes_per_batch, data.instances_per_class, **common)


def build_pretrain_model(config: PretrainConfig, n_classes: int, img_size: int):
    """The backbone with an embedding head (PA-Triplet) or a classifier over the fractal classes (FDSL)."""
    model = config.model
    head = dict(head="classifier", num_classes=n_classes) if config.objective == "fdsl" else dict(
        head="embedding", embedding_dim=model.embedding_dim, hidden_dim=model.hidden_dim
    )
    return build_model(model.backbone, img_size=model.img_size or img_size, **head, **model.overrides)


def build_objective(config: PretrainConfig):
    if config.objective == "fdsl":
        return CrossEntropyObjective(config.fdsl.label_smoothing)
    settings = config.pa_triplet
    return PATripletObjective(
        settings.filter,
        settings.mode,
        margin=settings.margin,
        normalize_embeddings=settings.normalize_embeddings,
        reducer=settings.reducer,
        max_triplets=settings.max_triplets,
        min_relative_gap=settings.min_relative_gap,
        seed=config.train.seed,
    )


def check_training_rows(config: PretrainConfig, table: pd.DataFrame, split: HoldoutSplit) -> None:
    """Fail at start, naming the keys, when the held-out split leaves too few classes or instances for a batch."""
    if config.shuffled_batches or (config.objective == "pa_triplet" and config.pa_triplet.mode == "explicit"):
        return
    counts = table["class_id"].iloc[split.training].value_counts()
    data = config.data
    for key, have, need in (
        ("classes_per_batch", len(counts), data.classes_per_batch),
        ("instances_per_class", int(counts.min()), data.instances_per_class),
    ):
        if have < need:
            raise ConfigError(
                f"pretrain.data.{key}: {need}, but the training rows have {have} (fractals.holdout holds out "
                f"{len(split.heldout)} of {len(table)} rows); lower pretrain.data.{key} or fractals.holdout's fractions"
            )


def build_validation(
    config: PretrainConfig, table: pd.DataFrame, spec: FamilySpec, shards: dict | None, split: HoldoutSplit
) -> PretrainValidation | None:
    """The loop's validation hook on the held-out rows (rendered with the table's seeds), or None when off."""
    settings = config.validation
    if not settings.enabled:
        return None
    probe = settings.probe
    return PretrainValidation(
        settings,
        build_fractal_dataset(table, spec, config, shards, as_stored=True),
        split,
        classifier=config.objective == "fdsl",
        seed=config.train.seed,
        probe=read_retrieval_dataset(probe.dataset, probe.root) if probe is not None else None,
        probe_image_size=(probe.image_size if probe is not None else None) or config.model.img_size or spec.size,
    )


def pretrain(
    table: pd.DataFrame,
    spec: FamilySpec,
    config: PretrainConfig,
    *,
    shards: dict | None = None,
    split: HoldoutSplit | None = None,
) -> tuple[dict, pd.DataFrame]:
    """Pre-train on the training rows of the family's ``table`` (rendered through ``spec``); returns the model
    file payload and the per-step history.

    ``split`` (:func:`fdsml.data.holdout.split_table`; None: train on every row) says which rows
    are held out: never trained on, read by the validation (``validation``). The classifier
    (FDSL) has one output per training class, in ``split.training_classes`` order.
    ``shards`` is the materialised renderings' manifest (``fractal_images``), read when
    ``data.source`` is ``shards``.
    """
    split = split if split is not None else split_table(table, HoldoutSettings(), seed=0)
    check_training_rows(config, table, split)
    context = distributed.setup(config.train.device)
    plan = plan_pretrain(config, len(split.training), context.world_size).check()
    dataset = TrainingRows(build_fractal_dataset(table, spec, config, shards), split)
    sampler = build_batch_sampler(dataset.labels, config, context, plan)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.train.seed)
        model = build_pretrain_model(config, len(split.training_classes), spec.size)
    objective = build_objective(config)
    fingerprint = run_fingerprint(config, spec, table, context.world_size, shards, split)
    validation = build_validation(config, table, spec, shards, split) if context.is_main else None
    result = train(
        model,
        objective,
        dataset,
        sampler,
        config.train,
        config.optimizer,
        Path(config.run_dir) / "last.pt",
        plan=plan,
        fingerprint=fingerprint,
        validation=validation,
    )
    metadata = {
        "objective": config.objective,
        "filter": config.pa_triplet.filter if config.objective == "pa_triplet" else None,
        "mode": config.pa_triplet.mode if config.objective == "pa_triplet" else None,
        "steps": result.steps,
        "training_classes": split.training_classes.tolist(),
        "run_fingerprint": fingerprint,
    }
    return model_payload(result.model, **metadata), result.history
