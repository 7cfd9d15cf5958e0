"""Retrieval fine-tuning with proxy losses and its evaluation (docs/method.md §5.1 and §8).

Each starting point (scratch, or a pre-trained checkpoint's trunk) gets the same recipe, at its
own rate when it has one (its ``base_lr``, or the rate search's: :mod:`fdsml.training.retrieval_comparison`):
a fresh embedding head, a proxy loss whose proxies train at a multiple of the model's rate, a
warm-up with the trunk frozen, then a fixed schedule whose length follows the data's epochs
(:func:`sized_to_data`: the embedded datasets keep their demonstration's step cap). There is no
model selection: the test classes are used once, for the final numbers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from fdsml import fingerprints
from fdsml.config import ConfigError, parse, require_non_negative, require_positive
from fdsml.data import (
    ImageRecords,
    ImageRecordsDataset,
    ImageTransform,
    RetrievalSplits,
    available_datasets,
    load_image,
    read_retrieval_dataset,
    reader_module,
)
from fdsml.data.retrieval_datasets import splits_by_class
from fdsml.evaluation.embedding import model_outputs, retrieval_split_scores
from fdsml.evaluation.retrieval_examples import nearest_neighbours, top_k_figure
from fdsml.losses.couce import CouCESettings, build_couce_objective
from fdsml.losses.proxy import PROXY_LOSSES, build_proxy_loss
from fdsml.models import model_payload
from fdsml.models.network import EmbeddingModel
from fdsml.models.starting_points import StartingPoint, check_start_settings, start_payload, start_record
from fdsml import distributed
from fdsml.training.comparison import BaselineSettings, rate_key, rate_record, seed_summary
from fdsml.training.finetune import FineTuneRun, FineTuning, at_start_rate, defining_start, finetune
from fdsml.training.live import live_metrics
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.objectives import ProxyObjective
from fdsml.training.rate_search import RateSearchSettings
from fdsml.training.training_plan import PlanKeys, TrainingPlan, plan_training

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class RetrievalData:
    """Which dataset, where, and how its images are shown to the network."""

    dataset: str = "omniglot"
    root: str | None = fingerprints.non_defining(default=None)  # where: the training split's listing enters by content
    image_size: int = 64
    crop_fraction: float = 0.875
    area_range: tuple[float, float] = (0.08, 1.0)
    flip: bool = True
    batch_size: int = 32
    eval_batch_size: int = fingerprints.non_defining(default=128)  # evaluation only: not part of a run's fingerprint
    eval_workers: int = fingerprints.non_defining(default=0)  # DataLoader processes loading the test images
    faiss_threads: int | None = fingerprints.non_defining(default=None)  # null: every core rank 0 may use
    ks: tuple[int, ...] | None = fingerprints.non_defining(default=None)
    train_classes: int | None = None  # layouts split by class: how many of the sorted classes train (None: the protocol's)

    def __post_init__(self):
        if self.dataset not in available_datasets():
            raise ConfigError(f"dataset: unknown dataset {self.dataset!r}; choose one of {', '.join(available_datasets())}")
        if self.train_classes is not None:
            require_positive("train_classes", self.train_classes)
            if not splits_by_class(self.dataset):
                raise ConfigError(f"train_classes: {self.dataset} has its split given by its files; leave it null")
        require_positive("image_size", self.image_size)
        require_positive("batch_size", self.batch_size)
        require_positive("eval_batch_size", self.eval_batch_size)
        require_non_negative("eval_workers", self.eval_workers)
        if self.faiss_threads is not None:
            require_positive("faiss_threads", self.faiss_threads)

    def transform(self, train: bool) -> ImageTransform:
        return ImageTransform(
            self.image_size, train=train, crop_fraction=self.crop_fraction, flip=self.flip, area_range=self.area_range
        )


@dataclass(frozen=True)
class ProxyLossSettings:
    """A pytorch-metric-learning proxy loss, its own options, and the proxies' learning-rate multiplier."""

    name: str = "proxy_anchor"
    options: dict[str, Any] = field(default_factory=dict)
    proxy_lr_multiplier: float = 100.0

    def __post_init__(self):
        if self.name not in PROXY_LOSSES:
            raise ConfigError(f"name: unknown proxy loss {self.name!r}; choose one of {', '.join(PROXY_LOSSES)}")
        set_by_fdsml = {"num_classes": "the training classes' count", "embedding_size": "retrieval.embedding.embedding_dim"}
        PROXY_LOSSES.check_options(self.name, self.options, "options", set_by_fdsml)
        require_positive("proxy_lr_multiplier", self.proxy_lr_multiplier)


@dataclass(frozen=True)
class EmbeddingSettings:
    """The head put on every starting point: pooled trunk features -> linear -> the embedding."""

    embedding_dim: int = 512
    global_pool: str = "avgmax"

    def __post_init__(self):
        require_positive("embedding_dim", self.embedding_dim)


@dataclass(frozen=True)
class RetrievalConfig:
    """``params:retrieval``."""

    # Sweeps: each run's own start and seed enter its fingerprint, not the whole lists.
    starts: tuple[StartingPoint, ...] = fingerprints.non_defining(default=(StartingPoint("scratch"),))
    seeds: tuple[int, ...] = fingerprints.non_defining(default=(0,))
    data: RetrievalData = field(default_factory=RetrievalData)
    loss: ProxyLossSettings = field(default_factory=ProxyLossSettings)
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(name="adamw", base_lr=1e-4, reference_batch=32, schedule="constant")
    )
    train: LoopConfig = field(default_factory=LoopConfig)
    couce: CouCESettings | None = None
    # Which rate each start fine-tunes at enters its runs through the start's base_lr; the search's settings do not.
    rate_search: RateSearchSettings | None = fingerprints.non_defining(default=None)
    # The embedded demonstration's step caps, resolved into train.max_steps before a run is fingerprinted (sized_to_data).
    demo_max_steps: dict[str, int] | None = fingerprints.non_defining(default=None)
    baselines: BaselineSettings = fingerprints.non_defining(default_factory=BaselineSettings)
    run_dir: str = fingerprints.non_defining(default="data/06_models/retrieval_runs")
    live_dir: str | None = fingerprints.non_defining(default=None)
    n_example_queries: int = fingerprints.non_defining(default=6)

    def __post_init__(self):
        for dataset, steps in (self.demo_max_steps or {}).items():
            require_positive(f"demo_max_steps.{dataset}", steps)
        if not self.starts:
            raise ConfigError("starts: give at least one starting point (e.g. {name: scratch})")
        names = [start.name for start in self.starts]
        if len(set(names)) != len(names):
            raise ConfigError(f"starts: names must be unique, got {names}")
        check_start_settings(self.starts, "starts")
        if not self.seeds:
            raise ConfigError("seeds: give at least one seed")

    def plugin_modules(self) -> tuple[str, ...]:
        """The module of the reader of the dataset retrieval fine-tunes and measures on (:mod:`fdsml.plugins`)."""
        return (reader_module(self.data.dataset),)


def parse_retrieval_params(params: dict[str, Any]) -> RetrievalConfig:
    """Validate ``params:retrieval``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(RetrievalConfig, params, "retrieval")


def load_splits(config: RetrievalConfig) -> RetrievalSplits:
    """The dataset's zero-shot splits, training labels renumbered 0..C-1 for the proxies.

    Refuses, before any training, a Recall@K list whose largest K exceeds what a query searches.
    """
    splits = read_retrieval_dataset(config.data.dataset, config.data.root, train_classes=config.data.train_classes)
    ks = config.data.ks or splits.ks
    _check_ks_fit(ks, splits, given=config.data.ks is not None)
    return RetrievalSplits(
        splits.name,
        splits.train.with_contiguous_labels(),
        ks,
        test=splits.test,
        query=splits.query,
        gallery=splits.gallery,
    )


def _check_ks_fit(ks: tuple[int, ...], splits: RetrievalSplits, *, given: bool) -> None:
    """Recall@K needs K items to search: the gallery, or the other test items when every test item queries."""
    searched = len(splits.gallery) if splits.has_query_set else len(splits.test) - 1
    if max(ks) <= searched:
        return
    if searched < 1:
        raise ConfigError(
            f"{splits.name}: a query searches no other image, so no Recall@K can be scored; give the test split (or the "
            "gallery) at least two images of a class (retrieval.data.train_classes moves classes between the splits)"
        )
    fitting = [k for k in ks if k <= searched] or [1]
    source = "" if given else f" (null: {splits.name}'s own list)"
    raise ConfigError(
        f"retrieval.data.ks: {list(ks)}{source} asks for Recall@{max(ks)}, but a query of {splits.name} searches "
        f"{searched} items; set ks to Ks of at most {searched}, e.g. `retrieval: {{data: {{ks: {fitting}}}}}` in "
        "conf/local/parameters_retrieval.yml (or the --env environment's folder): --params cannot give a list"
    )


def demo_cap(config: RetrievalConfig) -> int | None:
    """The embedded demonstration's step cap of this run's dataset (``demo_max_steps``), when ``train.max_steps`` is null."""
    return None if config.train.max_steps is not None else (config.demo_max_steps or {}).get(config.data.dataset)


def sized_to_data(config: RetrievalConfig) -> RetrievalConfig:
    """``config`` with its budget resolved: ``train.max_steps`` when given, else the dataset's demonstration cap
    (``demo_max_steps``: the embedded default's one-minute budget), else ``train.epochs`` full epochs (your own data)."""
    cap = demo_cap(config)
    return config if cap is None else replace(config, train=replace(config.train, max_steps=cap))


def budget_note(config: RetrievalConfig) -> str:
    """Where each run's length comes from, in the words of its keys."""
    cap = demo_cap(config)
    if cap is not None:
        return f"budget: {cap} steps, the embedded demonstration's cap (retrieval.demo_max_steps.{config.data.dataset})"
    if config.train.max_steps is not None:
        return f"budget: {config.train.max_steps} steps (retrieval.train.max_steps)"
    return f"budget: {config.train.epochs} epochs of the training split (retrieval.train.epochs)"


def plan_retrieval(config: RetrievalConfig, images: int, world_size: int) -> TrainingPlan:
    """The fine-tuning plan of every (start, seed) on ``images`` training images (unchecked), its budget sized to the data."""
    return plan_training(
        f"retrieval/{config.data.dataset}",
        images=images,
        batch_per_replica=config.data.batch_size,
        world_size=world_size,
        optimizer=config.optimizer,
        loop=sized_to_data(config).train,
        keys=PlanKeys(batch="retrieval.data.batch_size", warmup="retrieval.optimizer.warmup_steps"),
        lr_multipliers={"proxies": config.loss.proxy_lr_multiplier},
    )


def fine_tuning(config: RetrievalConfig, n_classes: int) -> FineTuning:
    """Retrieval's part of the fine-tuning assembly: an embedding head on pooled trunk features, the
    proxy loss over ``n_classes`` training classes, and the augmented training view."""
    return FineTuning(
        key="retrieval",
        code=(__name__, reader_module(config.data.dataset)),
        config=config,
        image_size=config.data.image_size,
        head={"head": "embedding", "embedding_dim": config.embedding.embedding_dim},
        objective=lambda seed: build_objective(config, n_classes, seed),
        training_view=lambda: config.data.transform(train=True),
        plan=lambda images, world_size: plan_retrieval(config, images, world_size),
        model_overrides={"global_pool": config.embedding.global_pool},
    )


def finetune_run(dataset: str, start: StartingPoint, seed: int) -> FineTuneRun:
    """The run of ``start`` with ``seed`` on ``dataset`` (the splits' name): its folder ``<dataset>/<start>_seed<seed>``,
    so that two datasets' runs live side by side and each resumes; its start (its rate is the configuration's) and seed
    define it."""
    return FineTuneRun(start, seed, f"{dataset}/{start.name}_seed{seed}", {"start": defining_start(start), "seed": seed})


def build_objective(config: RetrievalConfig, n_classes: int, seed: int):
    """The proxy loss alone, or wrapped in CouCE's training-only regularisers (``retrieval.couce``).

    The proxies are drawn from ``seed`` so every replica starts from the same ones.
    """
    loss, dim = config.loss, config.embedding.embedding_dim
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if config.couce is not None:
            return build_couce_objective(
                config.couce, loss.name, n_classes, dim, loss.proxy_lr_multiplier, seed=seed, loss_options=loss.options
            )
        return ProxyObjective(build_proxy_loss(loss.name, n_classes, dim, **loss.options), loss.proxy_lr_multiplier)


def embed(model: EmbeddingModel, records: ImageRecords, config: RetrievalConfig) -> np.ndarray | None:
    """Embeddings of ``records`` with the test view (resize + centre crop), in order; None off rank 0 under DDP."""
    dataset = ImageRecordsDataset(records, config.data.transform(train=False))
    device = next(model.parameters()).device
    outputs = model_outputs(
        model, dataset, batch_size=config.data.eval_batch_size, device=device, workers=config.data.eval_workers
    )
    return None if outputs is None else outputs[0].numpy()


def evaluate(model: EmbeddingModel, splits: RetrievalSplits, config: RetrievalConfig, seed: int = 0) -> dict[str, float]:
    """Recall@K, MAP@R, R-Precision and NMI on the test classes (or queries against the gallery), on every replica."""
    return evaluate_scores(model, splits, config, seed)[0]


def evaluate_scores(
    model: EmbeddingModel, splits: RetrievalSplits, config: RetrievalConfig, seed: int = 0
) -> tuple[dict[str, float], np.ndarray]:
    """:func:`evaluate` and each scored query's Recall@1 hit, for differences paired over the same queries."""
    return retrieval_split_scores(
        lambda records: embed(model, records, config), splits, seed=seed, threads=config.data.faiss_threads
    )


@dataclass(frozen=True)
class StartResult:
    """One start fine-tuned with every seed: its plan at its own rate, each seed's metrics and Recall@1 hits (one array
    per seed, over the same queries), the stacked histories, and the first seed's model file."""

    start: StartingPoint
    plan: TrainingPlan
    per_seed: dict[str, dict[str, float]]
    hits: list[np.ndarray]
    history: pd.DataFrame
    model: dict
    recorded: dict[str, Any]  # which trunk these numbers belong to, and the queries they leave out

    def record(self, dataset: str, rate: dict[str, Any]) -> dict[str, Any]:
        """Its entry in ``retrieval_metrics``: the trunk it began from, the dataset, the queries left out, its rate, its
        length, and every seed's metrics with their mean (and standard deviation from two seeds on)."""
        return {**self.recorded, "dataset": dataset, "rate": rate, "steps": self.plan.total_steps, **seed_summary(self.per_seed)}


def finetune_start(
    config: RetrievalConfig, splits: RetrievalSplits, start: StartingPoint, pretrained: dict | None = None, live=None
) -> StartResult:
    """Fine-tune ``start`` with every seed at its own rate (its ``base_lr``, else ``optimizer.base_lr``) and score each run.

    ``config`` is sized to the data (:func:`sized_to_data`); each run's rows and final metrics go live to ``live``
    under ``<dataset>/<start>_seed<seed>/``.
    """
    context = distributed.setup(config.train.device)
    at_rate = at_start_rate(config, start)
    plan = plan_retrieval(at_rate, len(splits.train), context.world_size).check()
    task = fine_tuning(at_rate, int(splits.train.labels.max()) + 1)
    per_seed, hits, histories, first_model = {}, [], [], None
    for seed in config.seeds:
        run = finetune_run(splits.name, start, seed)
        prefix = f"{run.folder}/"
        result, _ = finetune(task, splits.train, run, pretrained=pretrained, plan=plan, live=live.run(prefix) if live else None)
        per_seed[str(seed)], seed_hits = evaluate_scores(result.model, splits, at_rate, seed)
        hits.append(seed_hits)
        if live is not None:
            live.final(per_seed[str(seed)], prefix)
        logger.info("%s seed %d: %s", start.name, seed, _format(per_seed[str(seed)]))
        histories.append(result.history.assign(dataset=splits.name, start=start.name, seed=seed))
        if first_model is None:
            first_model = model_payload(result.model.cpu(), start=start.name, checkpoint=start.checkpoint, seed=seed)
    recorded = start_record(start.checkpoint, start_payload(start, pretrained)) | {"queries_left_out": splits.lone_queries}
    return StartResult(start, plan, per_seed, hits, pd.concat(histories, ignore_index=True), first_model, recorded)


def rate_source(config: RetrievalConfig, start: StartingPoint) -> str:
    """Where ``start``'s rate comes from: its own ``base_lr`` key, or the task's ``optimizer.base_lr``."""
    return rate_key("retrieval", "starts", config.starts, start)


def compare_starting_points(config: RetrievalConfig, pretrained: dict | None = None) -> tuple[dict, pd.DataFrame, dict[str, dict]]:
    """Fine-tune and evaluate every starting point with every seed, each at its own rate.

    Returns the metrics (``{start: {"dataset": name, "rate": ..., "steps": ..., "seeds": {seed: metrics}, "mean": ...,
    "std": ...}}``, ``std`` None for one seed), the concatenated training histories, and the model files of the first
    seed per starting point. Each run's rows and final metrics go live to ``live_dir`` under ``<dataset>/<start>_seed<seed>/``.
    """
    config = sized_to_data(config)
    splits = load_splits(config)
    live = live_metrics(config.live_dir, config, distributed.setup(config.train.device))
    results = [finetune_start(config, splits, start, pretrained, live) for start in config.starts]
    metrics = {
        result.start.name: result.record(
            splits.name,
            rate_record(at_start_rate(config, result.start).optimizer.base_lr, result.plan, rate_source(config, result.start)),
        )
        for result in results
    }
    return metrics, pd.concat([result.history for result in results], ignore_index=True), {r.start.name: r.model for r in results}


def _format(metrics: dict[str, float]) -> str:
    return ", ".join(f"{name} {100 * value:.1f}" for name, value in metrics.items())


def retrieval_examples(model: EmbeddingModel, splits: RetrievalSplits, config: RetrievalConfig, k: int = 5):
    """A figure of the top-``k`` retrievals of a few seeded random queries."""
    queries, gallery = (splits.query, splits.gallery) if splits.has_query_set else (splits.test, splits.test)
    rng = np.random.default_rng(config.seeds[0])
    chosen = rng.choice(len(queries.labels), size=min(config.n_example_queries, len(queries.labels)), replace=False)
    gallery_embeddings = embed(model, gallery, config)
    query_embeddings = gallery_embeddings if queries is gallery else embed(model, queries, config)

    def neighbours_of_chosen() -> np.ndarray:
        found = nearest_neighbours(query_embeddings[chosen], gallery_embeddings, k + 1, same_set=False)
        if splits.has_query_set:
            return found[:, :k]
        # the query is in the gallery: drop it from its own list
        return np.array([[i for i in row if i != q][:k] for row, q in zip(found, chosen)])

    neighbours = distributed.on_main_rank(neighbours_of_chosen, distributed.current())
    query_images = [load_image(queries, int(i)).numpy() for i in chosen]
    needed = {int(i) for i in neighbours.ravel()}
    gallery_images = {i: load_image(gallery, i).numpy() for i in needed}
    return top_k_figure(query_images, queries.labels[chosen], gallery_images, gallery.labels, neighbours)
