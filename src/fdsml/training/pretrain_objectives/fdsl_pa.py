"""``fdsl_pa``: cross-entropy plus a weighted PA-Triplet term on the same embeddings (parameter-aware, keeping the
class contrast cross-entropy learns fast)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from fdsml.config import ConfigError
from fdsml.losses.candidates import needs_class_balance
from fdsml.losses.precision import full_precision
from fdsml.training.objectives import cross_entropy
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective
from fdsml.training.pretrain_objectives.recipe import BatchChoice, Batches, ObjectiveRecipe, register_objective
from fdsml.training.pretrain_objectives.triplet_settings import DescriptorTripletSettings


@dataclass(frozen=True)
class FDSLPASettings(DescriptorTripletSettings):
    """``fdsl_pa``: cross-entropy (``label_smoothing``) plus ``weight`` x a PA-Triplet term mined in each batch.

    The defaults are the fair comparison's tuned recipe (docs/studies.md), as conf/base's."""

    margin: float = 0.171
    graded_margin: bool = True
    weight: float = 5.64
    label_smoothing: float = 0.0
    batches: BatchChoice = "class_balanced"

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


class CrossEntropyPATripletObjective(nn.Module):
    """Cross-entropy over the fractal classes plus ``weight`` x a PA-Triplet term, both on the same batch's embeddings.

    The class contrast cross-entropy learns fast, and the triplet term adds the descriptor's
    order. The class head (a linear layer on the embedding) is the objective's own, like proxies:
    the model stays an embedding model, so its checkpoints, validation, export and fine-tuning
    starting points are PA-Triplet's; the head trains at the model's rate with its weight decay
    and, like proxies, runs in float32 with the loss.
    """

    bf16_parts: tuple[str, ...] = ()  # a margin on embedding distances, as PATripletObjective's (docs/cpu.md, precision parity)

    def __init__(
        self, triplet: PATripletObjective, num_classes: int, embedding_dim: int, *, weight: float = 1.0, label_smoothing: float = 0.0
    ):
        super().__init__()
        if weight < 0:
            raise ValueError(f"the triplet term's weight must be >= 0, got {weight}")
        self.triplet = triplet
        self.classifier = nn.Linear(embedding_dim, num_classes)
        self.weight = weight
        self.label_smoothing = label_smoothing

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        embeddings = model(batch["image"])
        logits = full_precision(self.classifier)(embeddings)
        class_loss = cross_entropy(logits, batch["label"], label_smoothing=self.label_smoothing)
        triplet_loss, parts = self.triplet.term(embeddings, batch, step)
        accuracy = (logits.detach().argmax(dim=1) == batch["label"]).float().mean()
        loss = class_loss + self.weight * triplet_loss
        return loss, {**parts, "cross_entropy": class_loss.detach(), "triplet_loss": triplet_loss.detach(), "accuracy": accuracy}

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.classifier.parameters())}]


@register_objective
class FDSLPA(ObjectiveRecipe):
    """Its class head draws initial weights: the objective is built under the run's seed."""

    name = "fdsl_pa"
    settings = FDSLPASettings

    def batches(self, settings: FDSLPASettings) -> Batches:
        return Batches(settings.batches)

    def batch_triplets(self, settings: FDSLPASettings):
        return settings.filter, settings

    def build(self, settings: FDSLPASettings, *, num_classes: int, embedding_dim: int, seed: int) -> nn.Module:
        triplet = PATripletObjective(settings.filter, "batch", **settings.loss_options(), seed=seed)
        return CrossEntropyPATripletObjective(
            triplet, num_classes, embedding_dim, weight=settings.weight, label_smoothing=settings.label_smoothing
        )

    def describe(self, settings: FDSLPASettings) -> dict[str, Any]:
        return {"filter": settings.filter, "mode": None}
