"""Pre-training on a formula family's dataset (FineFractalDB by default): settings, and the assembly of data, model and objective for the loop."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from fdsml import fingerprints
from fdsml.config import ConfigError, parse, require_positive
from fdsml.data import (
    ClassBalancedBatchSampler,
    ExplicitTripletBatchSampler,
    FractalCodesDataset,
    ShardedImagesDataset,
    ShuffledBatchSampler,
    read_retrieval_dataset,
    reader_module,
)
from fdsml.data.device_render import DeviceRenderedCodes, renders_on_device
from fdsml.data.holdout import HoldoutSettings, HoldoutSplit, TrainingRows, split_table, training_rows_at_most
from fdsml.evaluation.pretrain_validation import PretrainValidation
from fdsml.evaluation.validation_settings import ValidationSettings
from fdsml.families import FamilySpec, family_spec
from fdsml.families.generation import shards_fingerprint
from fdsml.losses.pa_triplet import mined_triplets
from fdsml.models import build_model, model_payload
from fdsml.models.backbones import backbone_family, check_overrides, require_backbone
from fdsml import distributed
from fdsml.distributed import DistContext
from fdsml.training.live import live_metrics
from fdsml.training.loop import Validation, train
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.pretrain_objectives import Batches, ObjectiveRecipe, objective_recipe, with_objective_sections
from fdsml.training.training_plan import PlanKeys, TrainingPlan, plan_training
from fdsml.training.run_folders import RunDefinition, run_fingerprint, run_folder

logger = logging.getLogger(__name__)

TRANSFORMER_OPTIMIZER = OptimizerConfig(
    name="adamw", base_lr=5e-4, reference_batch=512, weight_decay=0.05, schedule="warmup_cosine", warmup_fraction=0.05
)
"""DeiT's recipe (AdamW, 5e-4 per 512 images, weight decay 0.05, warm-up then cosine): transformers' default."""


@dataclass(frozen=True)
class ModelSettings:
    """A backbone (registered, or any timm name) and its head sizes (``None`` = the backbone's recipe)."""

    backbone: str = "resnet18"
    embedding_dim: int | None = None
    hidden_dim: int | None = None
    img_size: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        require_backbone("pretrain.model.backbone", self.backbone)
        check_overrides(self.backbone, self.overrides, "overrides")


@dataclass(frozen=True)
class DataSettings:
    """Where images come from and how batches are formed."""

    source: Literal["render", "shards", "device"] = "render"  # device: rendered in the step (fdsml.data.device_render)
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


@with_objective_sections  # and pretrain.<name>: the settings of every registered objective
@dataclass(frozen=True)
class PretrainConfig:
    """``params:pretrain``."""

    objective: str = "pa_triplet"  # a name registered in fdsml.training.pretrain_objectives
    model: ModelSettings = field(default_factory=ModelSettings)
    data: DataSettings = field(default_factory=DataSettings)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    # Replaces `optimizer` for a transformer backbone (in __post_init__): what a run trains with is `optimizer`, which
    # the fingerprint reads, so this field itself defines nothing.
    transformer_optimizer: OptimizerConfig | None = fingerprints.non_defining(default_factory=lambda: TRANSFORMER_OPTIMIZER)
    train: LoopConfig = field(default_factory=LoopConfig)
    # Validation reads the model under its own random state and restores it: it cannot change the weights.
    validation: ValidationSettings = fingerprints.non_defining(default_factory=ValidationSettings)
    run_dir: str = fingerprints.non_defining(default="data/06_models/pretrain_run")  # one folder per run fingerprint inside
    live_dir: str | None = fingerprints.non_defining(default=None)

    def __post_init__(self):
        objective_recipe(self.objective)
        if idle_optimizer_block(self) == "pretrain.optimizer":
            object.__setattr__(self, "optimizer", self.transformer_optimizer)
        check_batch_composition(self)
        if self.shuffled_batches and self.data.batches_per_epoch is not None:
            raise ConfigError(
                f"pretrain.data.batches_per_epoch: plain shuffled batches (as pretrain.{self.objective} asks) make one pass "
                "over the images per epoch; set it to null"
            )

    @property
    def recipe(self) -> ObjectiveRecipe:
        """The registered objective ``objective`` names."""
        return objective_recipe(self.objective)

    def plugin_modules(self) -> tuple[str, ...]:
        """The modules of the plug-ins a pre-training runs (:func:`fdsml.plugins.selected_modules`): its objective's, and
        the reader of the probe its held-out validation measures (which defines no run: it cannot change the weights)."""
        probe = self.validation.probe if self.validation.enabled else None
        return (type(self.recipe).__module__, *((reader_module(probe.dataset),) if probe is not None else ()))

    @property
    def objective_settings(self) -> Any:
        """The selected objective's settings (``pretrain.<objective>``)."""
        return getattr(self, self.objective)

    @property
    def batches(self) -> Batches:
        """How the selected objective's batches are formed, as its recipe says."""
        return self.recipe.batches(self.objective_settings)

    @property
    def shuffled_batches(self) -> bool:
        """Plain shuffled batches of P x K images (each image once per epoch, the dataset's class mix), not
        class-balanced ones: FDSL by default, ``fdsl_pa`` when asked, and PA-Triplet's batch mode for the filters
        without a same-class candidate (``all``, ``diff``: :func:`fdsml.losses.candidates.needs_class_balance`)."""
        return self.batches.kind == "shuffled"

    @property
    def explicit_triplets(self) -> bool:
        """Batches laid out ``[anchors | first | second]``, ``data.triplets_per_batch`` triplets each."""
        return self.batches.kind == "explicit_triplets"


def check_batch_composition(config: PretrainConfig) -> None:
    """Fail at start, naming the key, when a P x K batch cannot give the objective a triplet or a positive pair."""
    for need in config.recipe.batch_needs(config.objective_settings):
        have = getattr(config.data, need.key)
        if have < need.at_least:
            raise ConfigError(f"pretrain.data.{need.key}: {need.reason}, got {have}")


def batch_triplets(config: PretrainConfig):
    """``(filter, TripletLossSettings)`` of the triplet term mined in every batch (None: the objective mines none)."""
    return config.recipe.batch_triplets(config.objective_settings)


def trained_heldout_metric(config: PretrainConfig) -> str:
    """The held-out validation's column of what the objective trains for: the ordering agreement of the filter whose
    triplets it learns from; a classifier's top-1 on held-out instances of its classes (FDSL); else Recall@1 among the
    held-out classes."""
    mined = batch_triplets(config)
    triplet_filter = mined[0] if mined is not None else config.batches.triplet_filter
    if triplet_filter is not None:
        return f"val_unseen_agreement_{triplet_filter}"
    return "val_unseen_region_top1" if config.recipe.head == "classifier" else "val_unseen_class_recall_at_1"


def normalized_distances(config: PretrainConfig) -> bool:
    """Whether the selected objective compares L2-normalised embeddings (its recipe's answer)."""
    return config.recipe.normalized_distances(config.objective_settings)


def build_objective(config: PretrainConfig, num_classes: int, embedding_dim: int) -> torch.nn.Module:
    """The objective ``config`` selects; ``num_classes`` training classes, ``embedding_dim`` the model's output width
    (draws the initial weights of the objective's own class head, if any: call it under the run's seed)."""
    return config.recipe.build(config.objective_settings, num_classes=num_classes, embedding_dim=embedding_dim, seed=config.train.seed)


def idle_optimizer_block(config: PretrainConfig) -> str:
    """The optimizer block this run does not train with: ``pretrain.optimizer`` for a transformer (when
    ``transformer_optimizer`` replaces it), ``pretrain.transformer_optimizer`` otherwise."""
    replaced = config.transformer_optimizer is not None and backbone_family(config.model.backbone) == "transformer"
    return "pretrain.optimizer" if replaced else "pretrain.transformer_optimizer"


def optimizer_choice(config: PretrainConfig, plan: TrainingPlan) -> str:
    """One line: the optimizer and rate the run trains with, and why (its backbone's family, docs/pretrain.md)."""
    optimizer, backbone = config.optimizer, config.model.backbone
    if idle_optimizer_block(config) == "pretrain.optimizer":
        source = f"pretrain.transformer_optimizer, as {backbone} is a transformer"
    elif backbone_family(backbone) == "transformer":
        source = f"pretrain.optimizer: pretrain.transformer_optimizer is null, so the transformer {backbone} trains with it"
    else:
        source = f"pretrain.optimizer, as {backbone} is convolutional"
    return (
        f"Optimizer {optimizer.name}, lr {plan.learning_rate:.3g} (base_lr {optimizer.base_lr:g} x global batch "
        f"{plan.global_batch} / {optimizer.reference_batch}), {optimizer.schedule}: {source} (docs/pretrain.md)"
    )


def parse_pretrain_params(params: dict[str, Any]) -> PretrainConfig:
    """Validate ``params:pretrain``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(PretrainConfig, params, "pretrain")


def defining_run(
    config: PretrainConfig,
    spec: FamilySpec,
    codes_digest: str,
    shards: dict | None = None,
    split: HoldoutSplit | None = None,
) -> RunDefinition:
    """What defines a pre-training run, for its fingerprint (:func:`~fdsml.training.run_folders.run_fingerprint`).

    The codes table enters by its :func:`~fdsml.fingerprints.content_digest` (``codes_digest``, of the rows
    trained on), its held-out split by content; materialised shards (``data.source: shards``)
    by the fingerprint the fractals pipeline recorded for them. The code is this module's and the selected
    family's and objective's (a plug-in imported by nobody, :mod:`fdsml.plugins`), with their imports.
    """
    inputs = {"codes": codes_digest}
    if split is not None:
        inputs["split"] = fingerprints.content_digest({"training": split.training, "heldout": split.heldout})
    if config.data.source == "shards":
        inputs["images"] = (shards or {}).get("fingerprint", "")
    return RunDefinition({"pretrain": config, **spec.defining()}, code=(__name__, type(spec.family).__module__, type(config.recipe).__module__), inputs=inputs)


def check_shards_match(config: PretrainConfig, spec: FamilySpec, codes_digest: str, shards: dict | None) -> None:
    """Materialised renderings are trained on only when they were rendered from this table with these settings:
    a table edited after the fractals pipeline ran, read by a run that starts at its pre-training node, would
    otherwise be trained on through the old table's images."""
    if config.data.source != "shards" or shards is None:
        return
    if shards.get("fingerprint") != shards_fingerprint(codes_digest, spec):
        raise ConfigError(
            "fractal_images: the materialised renderings were rendered from another codes table or other fractals "
            "settings than fractal_codes; render them again with `kedro run --pipelines=fractals`"
        )


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
    if data.source == "device" and not as_stored and renders_on_device(spec, data.instances):
        return DeviceRenderedCodes(table, spec, seed=config.train.seed, fresh_noise=data.fresh_noise, img_size=img_size)
    return FractalCodesDataset(
        table,
        spec,
        seed=config.train.seed,
        fresh_noise=data.fresh_noise and not as_stored,
        instances="table" if as_stored else data.instances,
        img_size=img_size,
    )


def pretraining_rows(fractals: dict[str, Any]) -> tuple[int, str]:
    """The rows pre-training trains on, with a note: the codes table's, less those ``fractals.holdout``
    holds out (whole classes and a region of each other class). The guard band around each region
    (``fractals.holdout.gap``) depends on the table's descriptors: with a gap the count is an upper bound.
    """
    family = family_spec(fractals).settings
    holdout = parse(HoldoutSettings, fractals.get("holdout", {}), "fractals.holdout")
    rows = training_rows_at_most(family.n_classes, family.instances_per_class, holdout)
    note = "images: the training rows of fractals.n_classes x fractals.instances_per_class after fractals.holdout"
    if holdout.gap and holdout.instance_fraction:
        note += " (at most: the guard band of fractals.holdout.gap takes a few more, drawn from the table)"
    return rows, note


def plan_pretrain(config: PretrainConfig, images: int, world_size: int) -> TrainingPlan:
    """The pre-training plan on ``images`` fractal images (unchecked).

    An epoch is ``data.batches_per_epoch`` global batches, by default about one pass over the
    images and at least one batch per replica: images are rendered afresh each epoch, so a tiny
    dataset still gives every replica a step. Plain shuffled batches (FDSL) make exactly one pass.
    """
    data, explicit = config.data, config.explicit_triplets
    batch = 3 * data.triplets_per_batch if explicit else data.classes_per_batch * data.instances_per_class
    triplets, mining = None, batch_triplets(config)
    if mining is not None:
        # Shuffled batches (all, diff): at most all's count, reached by diff when every image is of its own class.
        counted = "all" if config.shuffled_batches else mining[0]
        mined = mined_triplets(counted, data.classes_per_batch, data.instances_per_class)
        triplets = (mined, min(mined, mining[1].max_triplets or mined))
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
    """P x K class-balanced batches, [anchors | first | second] batches in explicit mode, or plain shuffled
    batches of P x K images (FDSL by default; PA-Triplet's all and diff); sharded per rank."""
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
    if config.explicit_triplets:
        return ExplicitTripletBatchSampler(labels, data.triplets_per_batch, config.batches.triplet_filter, **common)
    return ClassBalancedBatchSampler(labels, data.classes_per_batch, data.instances_per_class, **common)


def build_pretrain_model(config: PretrainConfig, n_classes: int, img_size: int):
    """The backbone with a classifier over the fractal classes (FDSL) or an embedding head (every other objective;
    ``fdsl_pa``'s class head is the objective's own)."""
    model = config.model
    head = dict(head="classifier", num_classes=n_classes) if config.recipe.head == "classifier" else dict(
        head="embedding", embedding_dim=model.embedding_dim, hidden_dim=model.hidden_dim
    )
    return build_model(model.backbone, img_size=model.img_size or img_size, **head, **model.overrides)


def check_training_rows(config: PretrainConfig, table: pd.DataFrame, split: HoldoutSplit) -> None:
    """Fail at start, naming the keys, when the held-out split leaves too few classes or instances for a batch."""
    if config.shuffled_batches or config.explicit_triplets:
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
        classifier=config.recipe.head == "classifier",
        seed=config.train.seed,
        normalize=normalized_distances(config),
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
    watch_validation: Callable[[Validation], Validation] | None = None,
) -> tuple[dict, pd.DataFrame]:
    """Pre-train on the training rows of the family's ``table`` (rendered through ``spec``); returns the model
    file payload and the per-step history.

    ``split`` (:func:`fdsml.data.holdout.split_table`; None: train on every row) says which rows
    are held out: never trained on, read by the validation (``validation``). The classifier
    (FDSL) has one output per training class, in ``split.training_classes`` order.
    ``shards`` is the materialised renderings' manifest (``fractal_images``), read when
    ``data.source`` is ``shards``. The table enters the run's fingerprint by the content digest of
    the rows given (about a second per million rows), never by a digest recorded beside it. The run lives in its own
    folder under ``run_dir``, named by its fingerprint (:mod:`fdsml.training.run_folders`). The rows go live to ``live_dir``
    as they settle (:mod:`fdsml.training.live`). ``watch_validation`` wraps the validation (a study's
    pruning: :class:`fdsml.tuning.pruning.ReportingValidation`); it cannot change what the run computes.
    """
    split = split if split is not None else split_table(table, HoldoutSettings(), seed=0)
    check_training_rows(config, table, split)
    context = distributed.setup(config.train.device)
    plan = plan_pretrain(config, len(split.training), context.world_size).check()
    codes = fingerprints.content_digest(table)
    check_shards_match(config, spec, codes, shards)
    dataset = TrainingRows(build_fractal_dataset(table, spec, config, shards), split)
    sampler = build_batch_sampler(dataset.labels, config, context, plan)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.train.seed)
        model = build_pretrain_model(config, len(split.training_classes), spec.size)
        objective = build_objective(config, len(split.training_classes), model.output_dim)
    fingerprint = run_fingerprint(defining_run(config, spec, codes, shards, split), config.train, context, objective)
    validation = build_validation(config, table, spec, shards, split) if context.is_main else None
    if validation is not None and watch_validation is not None:
        validation = watch_validation(validation)
    live = live_metrics(config.live_dir, config, context)
    if context.is_main:
        logger.info("%s", optimizer_choice(config, plan))
    result = train(
        model,
        objective,
        dataset,
        sampler,
        config.train,
        config.optimizer,
        run_folder(config.run_dir, fingerprint) / "last.pt",
        plan=plan,
        fingerprint=fingerprint,
        validation=validation,
        live=live.run() if live is not None else None,
    )
    metadata = {
        "objective": config.objective,
        **config.recipe.describe(config.objective_settings),
        "steps": result.steps,
        "training_classes": split.training_classes.tolist(),
        "run_fingerprint": fingerprint,
        "recipe": trained_recipe(config, plan),
        "data": {"family": spec.family.title, **spec.family.describe(spec.settings)},
    }
    return model_payload(result.model, **metadata), result.history


def trained_recipe(config: PretrainConfig, plan: TrainingPlan) -> dict[str, Any]:
    """How the run trained, as its model file records it: what the model card and summaries read, never
    the configuration at the time they are written (which may have changed since)."""
    return {
        "optimizer": dataclasses.asdict(config.optimizer),
        "learning_rate": plan.learning_rate,
        "batch_per_replica": plan.batch_per_replica,
        "world_size": plan.world_size,
        "batch": f"{config.data.classes_per_batch} classes x {config.data.instances_per_class} instances",
        "seed": config.train.seed,
    }
