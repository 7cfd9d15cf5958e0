"""``pml``: the pair-loss control, a pair-based pytorch-metric-learning loss on the class labels (Multi-Similarity)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from fdsml.config import ConfigError
from fdsml.losses.pair import PAIR_LOSSES, build_pair_loss
from fdsml.training.pretrain_objectives.recipe import BatchNeed, ObjectiveRecipe, register_objective


@dataclass(frozen=True)
class PairLossSettings:
    """``pml``: a pair-based loss of :mod:`fdsml.losses.pair` by name, with the library's keyword arguments."""

    loss: str = "multi_similarity"
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.loss not in PAIR_LOSSES:
            raise ConfigError(f"loss: unknown pair loss {self.loss!r}; choose one of {', '.join(PAIR_LOSSES)}")
        PAIR_LOSSES.check_options(self.loss, self.options, "options")
        try:  # the values, as the library checks them
            build_pair_loss(self.loss, **self.options)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"options: {self.loss} does not take {self.options}: {error}") from None


class PairLossObjective(nn.Module):
    """A pair-based metric-learning loss (:mod:`fdsml.losses.pair`) on the class labels of the embeddings."""

    bf16_parts: tuple[str, ...] = ()  # a margin on embedding distances, as PATripletObjective's (docs/cpu.md, precision parity)

    def __init__(self, loss: nn.Module):
        super().__init__()
        self.loss = loss

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        return self.loss(model(batch["image"]), batch["label"]), {}

    def param_groups(self) -> list[dict]:
        return []


@register_objective
class PairLoss(ObjectiveRecipe):
    """P x K batches: every positive pair is two instances of one class."""

    name = "pml"
    settings = PairLossSettings

    def batch_needs(self, settings: PairLossSettings) -> tuple[BatchNeed, ...]:
        return (BatchNeed("instances_per_class", 2, "the pml loss needs positive pairs, at least 2 instances per class"),)

    def build(self, settings: PairLossSettings, *, num_classes: int, embedding_dim: int, seed: int) -> nn.Module:
        return PairLossObjective(build_pair_loss(settings.loss, **settings.options))
