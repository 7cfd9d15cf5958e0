"""Pre-training objectives as configured: each one's settings (``pretrain.<objective>``), the triplets it
mines per batch, and the objective the loop calls.

* ``pa_triplet``: PA-Triplet (docs/method.md §3);
* ``fdsl``: cross-entropy over the fractal classes (the FDSL baseline);
* ``fdsl_pa``: cross-entropy plus a weighted PA-Triplet term on the same embeddings (parameter-aware,
  keeping the class contrast cross-entropy learns fast);
* ``label_triplet``: control, a triplet loss whose class labels alone decide positive and negative;
* ``pml``: control, a pair-based pytorch-metric-learning loss on the class labels (Multi-Similarity).

Every setting is a plain key under ``pretrain.<objective>``, so a study searches it like any other.
Errors name the key relative to the section; :func:`fdsml.config.parse` puts the section in front.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from fdsml.config import ConfigError, require_positive
from fdsml.losses.candidates import needs_class_balance
from fdsml.losses.pair import PAIR_LOSSES, build_pair_loss
from fdsml.training.objectives import (
    CrossEntropyObjective,
    CrossEntropyPATripletObjective,
    LabelTripletObjective,
    PairLossObjective,
    PATripletObjective,
)

if TYPE_CHECKING:  # the configuration is pre-training's; only its type is named here
    from fdsml.training.pretrain import PretrainConfig

Objective = Literal["pa_triplet", "fdsl", "fdsl_pa", "label_triplet", "pml"]
Filter = Literal["all", "each", "same", "diff"]
Batches = Literal["shuffled", "class_balanced"]


@dataclass(frozen=True)
class TripletLossSettings:
    """The margin loss of every triplet objective (choices the method leaves open)."""

    margin: float = 0.2
    normalize_embeddings: bool = True
    reducer: Literal["mean", "avg_nonzero"] = "mean"
    max_triplets: int | None = None

    def __post_init__(self):
        if self.margin < 0:
            raise ConfigError(f"margin: must be >= 0, got {self.margin}")
        if self.max_triplets is not None:
            require_positive("max_triplets", self.max_triplets)

    def loss_options(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~fdsml.training.objectives.PATripletObjective` these settings give."""
        return dict(
            margin=self.margin, normalize_embeddings=self.normalize_embeddings, reducer=self.reducer, max_triplets=self.max_triplets
        )


@dataclass(frozen=True)
class DescriptorTripletSettings(TripletLossSettings):
    """A triplet term ordered by the descriptor: the candidate filter, near-ties, the graded margin."""

    filter: Filter = "same"
    min_relative_gap: float = 0.0
    graded_margin: bool = False  # each triplet's margin: margin x its relative descriptor gap

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.min_relative_gap < 1:
            raise ConfigError(f"min_relative_gap: must lie in [0, 1) (0 keeps every triplet), got {self.min_relative_gap}")

    def loss_options(self) -> dict[str, Any]:
        return super().loss_options() | dict(min_relative_gap=self.min_relative_gap, graded_margin=self.graded_margin)


@dataclass(frozen=True)
class PATripletSettings(DescriptorTripletSettings):
    """PA-Triplet: candidate filter, triplet mode and the margin loss."""

    mode: Literal["batch", "explicit"] = "batch"


@dataclass(frozen=True)
class FDSLSettings:
    """The cross-entropy baseline: FractalDB's plain shuffled batches, or PA-Triplet's P x K ones to compare like with like."""

    label_smoothing: float = 0.0
    batches: Batches = "shuffled"


@dataclass(frozen=True)
class FDSLPASettings(DescriptorTripletSettings):
    """``fdsl_pa``: cross-entropy (``label_smoothing``) plus ``weight`` x a PA-Triplet term mined in each batch.

    The defaults are the fair comparison's tuned recipe (docs/studies.md), as conf/base's."""

    margin: float = 0.171
    graded_margin: bool = True
    weight: float = 5.64
    label_smoothing: float = 0.0
    batches: Batches = "class_balanced"

    def __post_init__(self):
        super().__post_init__()
        if self.weight < 0:
            raise ConfigError(f"weight: must be >= 0 (0: cross-entropy alone), got {self.weight}")
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError(f"label_smoothing: must lie in [0, 1), got {self.label_smoothing}")
        if self.batches == "shuffled" and needs_class_balance(self.filter):
            raise ConfigError(
                f"batches: plain shuffled batches hold almost no same-class candidates, so filter {self.filter!r} "
                "finds next to no triplet; use class_balanced (P x K batches), or filter all or diff"
            )


@dataclass(frozen=True)
class LabelTripletSettings(TripletLossSettings):
    """``label_triplet``: the margin loss of the label-only control (P x K batches, positive from the anchor's class),
    at its tuned defaults (docs/studies.md), as conf/base's."""

    margin: float = 0.225
    reducer: Literal["mean", "avg_nonzero"] = "avg_nonzero"


@dataclass(frozen=True)
class PairLossSettings:
    """``pml``: a pair-based loss of :mod:`fdsml.losses.pair` by name, with the library's keyword arguments."""

    loss: str = "multi_similarity"
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.loss not in PAIR_LOSSES:
            raise ConfigError(f"loss: unknown pair loss {self.loss!r}; choose one of {', '.join(PAIR_LOSSES)}")
        try:
            build_pair_loss(self.loss, **self.options)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"options: {self.loss} does not take {self.options}: {error}") from None


def batch_triplets(config: PretrainConfig) -> tuple[str, TripletLossSettings] | None:
    """``(filter, settings)`` of the triplet term mined in every batch (None: the objective mines none).

    The label-only control mines ``each``'s candidates (same class, other class)."""
    if config.objective == "pa_triplet" and config.pa_triplet.mode == "batch":
        return config.pa_triplet.filter, config.pa_triplet
    if config.objective == "fdsl_pa":
        return config.fdsl_pa.filter, config.fdsl_pa
    if config.objective == "label_triplet":
        return "each", config.label_triplet
    return None


def normalized_distances(config: PretrainConfig) -> bool:
    """Whether the objective compares L2-normalised embeddings: a triplet loss as its ``normalize_embeddings`` says;
    cross-entropy's features and the pair loss's cosine similarities are read normalised, as retrieval reads them."""
    settings = {"pa_triplet": config.pa_triplet, "fdsl_pa": config.fdsl_pa, "label_triplet": config.label_triplet}.get(config.objective)
    return True if settings is None else settings.normalize_embeddings


def check_batch_composition(config: PretrainConfig) -> None:
    """Fail at start, naming the key, when a P x K batch cannot give the objective a triplet or a positive pair."""
    data = config.data
    mined = batch_triplets(config)
    if mined is not None and not config.shuffled_batches:
        filter_name = mined[0]
        needed = {"each": 2, "same": 3}.get(filter_name, 1)
        if data.instances_per_class < needed:
            raise ConfigError(
                f"pretrain.data.instances_per_class: filter {filter_name!r} needs at least {needed} instances of the "
                f"anchor's class per batch, got {data.instances_per_class}"
            )
        if filter_name == "each" and data.classes_per_batch < 2:
            raise ConfigError(
                f"pretrain.data.classes_per_batch: filter {filter_name!r} needs at least 2 classes per batch, got {data.classes_per_batch}"
            )
    if config.objective == "pml" and data.instances_per_class < 2:
        raise ConfigError(
            f"pretrain.data.instances_per_class: the pml loss needs positive pairs, at least 2 instances per class, got {data.instances_per_class}"
        )


def shuffled_batches(config: PretrainConfig) -> bool:
    """Whether the objective trains on plain shuffled batches rather than P x K class-balanced ones."""
    if config.objective in ("fdsl", "fdsl_pa"):
        return getattr(config, config.objective).batches == "shuffled"
    if config.objective == "pa_triplet":
        return config.pa_triplet.mode == "batch" and not needs_class_balance(config.pa_triplet.filter)
    return False


def build_objective(config: PretrainConfig, num_classes: int, embedding_dim: int):
    """The objective ``config`` selects; ``num_classes`` training classes, ``embedding_dim`` the model's output width
    (draws the initial weights of the objective's own class head, if any: call it under the run's seed)."""
    seed = config.train.seed
    if config.objective == "fdsl":
        return CrossEntropyObjective(config.fdsl.label_smoothing)
    if config.objective == "pa_triplet":
        settings = config.pa_triplet
        return PATripletObjective(settings.filter, settings.mode, **settings.loss_options(), seed=seed)
    if config.objective == "label_triplet":
        return LabelTripletObjective(**config.label_triplet.loss_options(), seed=seed)
    if config.objective == "pml":
        return PairLossObjective(build_pair_loss(config.pml.loss, **config.pml.options))
    settings = config.fdsl_pa
    triplet = PATripletObjective(settings.filter, "batch", **settings.loss_options(), seed=seed)
    return CrossEntropyPATripletObjective(
        triplet, num_classes, embedding_dim, weight=settings.weight, label_smoothing=settings.label_smoothing
    )
