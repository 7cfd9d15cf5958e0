"""``fdsl``: cross-entropy over the fractal classes, the FDSL baseline (FractalDB's pre-training)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from fdsml.training.objectives import CrossEntropyObjective
from fdsml.training.pretrain_objectives.recipe import BatchChoice, Batches, ObjectiveRecipe, register_objective


@dataclass(frozen=True)
class FDSLSettings:
    """The cross-entropy baseline: FractalDB's plain shuffled batches, or PA-Triplet's P x K ones to compare like with like."""

    label_smoothing: float = 0.0
    batches: BatchChoice = "shuffled"


@register_objective
class FDSL(ObjectiveRecipe):
    """The model is a classifier over the training classes; the held-out validation reads its logits too."""

    name = "fdsl"
    settings = FDSLSettings
    head = "classifier"

    def batches(self, settings: FDSLSettings) -> Batches:
        return Batches(settings.batches)

    def build(self, settings: FDSLSettings, *, num_classes: int, embedding_dim: int, seed: int) -> nn.Module:
        return CrossEntropyObjective(settings.label_smoothing)
