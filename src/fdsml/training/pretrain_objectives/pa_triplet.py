"""``pa_triplet``: the Parameter-Aware Triplet loss (docs/method.md §3), the method's objective.

Candidates are filtered by class and ordered by their descriptor distance to the anchor. Batch
mode mines every filter-compliant triplet of a batch; explicit mode trains on ``[anchors | first |
second]`` batches, one triplet per three images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from fdsml.losses.candidates import check_filter, needs_class_balance
from fdsml.losses.pa_triplet import PATripletLoss, explicit_indices_tuple, graded_margins, mine_batch_triplets, without_near_ties
from fdsml.timers import Stopwatch
from fdsml.seeds import replica_rank, step_seed
from fdsml.training.pretrain_objectives.recipe import Batches, ObjectiveRecipe, register_objective
from fdsml.training.pretrain_objectives.triplet_settings import DescriptorTripletSettings

TRIPLET_MODES = ("batch", "explicit")
PER_FILTER_PARTS = ("triplet_accuracy", "nonzero_fraction")
"""Loss parts logged under the filter's name (``triplet_accuracy_same``): what the training triplets of that filter show."""


@dataclass(frozen=True)
class PATripletSettings(DescriptorTripletSettings):
    """PA-Triplet: candidate filter, triplet mode and the margin loss."""

    mode: Literal["batch", "explicit"] = "batch"


class PATripletObjective(nn.Module):
    """The Parameter-Aware Triplet loss: candidates filtered by class, ordered by descriptor distance.

    ``mode="batch"`` mines every filter-compliant triplet of a class-balanced batch (each image
    forwarded once, used in many triplets); ``mode="explicit"`` takes batches laid out as
    ``[anchors | first | second]`` from the explicit sampler, one triplet per three images.
    ``min_relative_gap`` > 0 leaves near-ties (:func:`~fdsml.losses.pa_triplet.without_near_ties`)
    out of the loss; the training triplet accuracy is still scored on every mined triplet.
    ``graded_margin``: each triplet's margin is ``margin`` x its relative descriptor gap
    (:func:`~fdsml.losses.pa_triplet.graded_margins`) rather than ``margin`` for all.
    """

    # Float32 in every part, on every device (fdsml.training.precision): its triplets order embedding distances whose
    # differences are finer than bf16 features resolve; under bf16 it learned on rounding (docs/cpu.md, precision parity).
    bf16_parts: tuple[str, ...] = ()

    def __init__(
        self,
        filter_name: str,
        mode: Literal["batch", "explicit"] = "batch",
        *,
        margin: float = 0.2,
        normalize_embeddings: bool = True,
        reducer: Literal["mean", "avg_nonzero"] = "mean",
        max_triplets: int | None = None,
        min_relative_gap: float = 0.0,
        graded_margin: bool = False,
        seed: int = 0,
    ):
        super().__init__()
        check_filter(filter_name)
        if mode not in TRIPLET_MODES:
            raise ValueError(f"unknown triplet mode {mode!r}; choose one of {', '.join(TRIPLET_MODES)}")
        self.filter_name = filter_name
        self.mode = mode
        self.max_triplets = max_triplets
        self.min_relative_gap = min_relative_gap
        self.graded_margin = graded_margin
        self.seed = seed
        self.loss = PATripletLoss(margin, normalize_embeddings, reducer)

    @property
    def parts_suffix(self) -> str:
        """What the per-filter parts are logged under (``triplet_accuracy_same``)."""
        return self.filter_name

    def subsampling(self, labels: torch.Tensor, step: int) -> torch.Generator | None:
        """The generator of this step's subset of the mined triplets (None: all are kept)."""
        if self.max_triplets is None:
            return None
        return torch.Generator(device=labels.device).manual_seed(step_seed(self.seed, step, replica_rank(), "triplet_subsample"))

    def indices(self, labels: torch.Tensor, psi: torch.Tensor, step: int):
        """The ordered triplets of this batch (positions in the batch)."""
        if self.mode == "explicit":
            return explicit_indices_tuple(psi)
        return mine_batch_triplets(
            labels, psi, self.filter_name, max_triplets=self.max_triplets, generator=self.subsampling(labels, step)
        )

    def term(self, embeddings: torch.Tensor, batch: dict[str, Any], step: int):
        """The reduced triplet loss of ``embeddings`` (the batch's, in its order) and its parts."""
        mining = Stopwatch(embeddings.device)
        indices = self.indices(batch["label"], batch["psi"], step)
        trained = without_near_ties(batch["psi"], indices, self.min_relative_gap)
        margins = graded_margins(batch["psi"], trained, self.loss.margin) if self.graded_margin else None
        mining.stop()
        loss, parts = self.loss(embeddings, trained, scored=indices, margins=margins)
        per_filter = {f"{name}_{self.parts_suffix}": parts.pop(name) for name in PER_FILTER_PARTS}
        return loss, {**parts, **per_filter, "mining_s": mining}

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        return self.term(model(batch["image"]), batch, step)

    def param_groups(self) -> list[dict]:
        return []


@register_objective
class PATriplet(ObjectiveRecipe):
    """Batch mode on P x K batches, except for the filters without a same-class candidate (``all``, ``diff``:
    :func:`fdsml.losses.candidates.needs_class_balance`), which take plain shuffled batches."""

    name = "pa_triplet"
    settings = PATripletSettings

    def batches(self, settings: PATripletSettings) -> Batches:
        if settings.mode == "explicit":
            return Batches("explicit_triplets", triplet_filter=settings.filter)
        return Batches("class_balanced" if needs_class_balance(settings.filter) else "shuffled")

    def batch_triplets(self, settings: PATripletSettings):
        return (settings.filter, settings) if settings.mode == "batch" else None

    def build(self, settings: PATripletSettings, *, num_classes: int, embedding_dim: int, seed: int) -> nn.Module:
        return PATripletObjective(settings.filter, settings.mode, **settings.loss_options(), seed=seed)

    def describe(self, settings: PATripletSettings) -> dict[str, Any]:
        return {"filter": settings.filter, "mode": settings.mode}
