"""``label_triplet``: the label-only control, a triplet loss whose class labels alone decide positive and negative."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from fdsml.losses.pa_triplet import allowed_triplets
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective
from fdsml.training.pretrain_objectives.recipe import ObjectiveRecipe, register_objective
from fdsml.training.pretrain_objectives.triplet_settings import TripletLossSettings


@dataclass(frozen=True)
class LabelTripletSettings(TripletLossSettings):
    """``label_triplet``: the margin loss of the label-only control (P x K batches, positive from the anchor's class),
    at its tuned defaults (docs/studies.md), as conf/base's."""

    margin: float = 0.225
    reducer: Literal["mean", "avg_nonzero"] = "avg_nonzero"


class LabelTripletObjective(PATripletObjective):
    """Control: a triplet loss whose class labels alone decide, no descriptor: the positive from the anchor's
    class, the negative from another, every such triplet of a P x K class-balanced batch (``each``'s
    candidates, never reordered). Its parts are logged under ``labels`` (``triplet_accuracy_labels``)."""

    def __init__(self, **loss_settings):
        super().__init__("each", "batch", **loss_settings)

    @property
    def parts_suffix(self) -> str:
        return "labels"

    def indices(self, labels: torch.Tensor, psi: torch.Tensor, step: int):
        return allowed_triplets(labels, "each", self.max_triplets, self.subsampling(labels, step))


@register_objective
class LabelTriplet(ObjectiveRecipe):
    """Mines ``each``'s candidates (same class, other class) in every P x K batch."""

    name = "label_triplet"
    settings = LabelTripletSettings

    def batch_triplets(self, settings: LabelTripletSettings):
        return "each", settings

    def build(self, settings: LabelTripletSettings, *, num_classes: int, embedding_dim: int, seed: int) -> nn.Module:
        return LabelTripletObjective(**settings.loss_options(), seed=seed)
