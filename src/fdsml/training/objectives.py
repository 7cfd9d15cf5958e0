"""Training objectives: what one batch costs. The loop calls ``objective(model, batch)`` and nothing else.

An objective returns the loss and a dict of named parts (0-d tensors, numbers or
:class:`~fdsml.measure.Stopwatch` timings) that the loop logs, reading them at log intervals.
Extra trainable parameters (proxies) are the objective's own, with their own optimiser
settings in ``param_groups``. The model's forward runs under the loop's autocast; every loss
runs in float32 (:mod:`fdsml.losses.precision`).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from fdsml.losses.candidates import check_filter
from fdsml.losses.pa_triplet import (
    PATripletLoss,
    allowed_triplets,
    explicit_indices_tuple,
    graded_margins,
    mine_batch_triplets,
    without_near_ties,
)
from fdsml.losses.precision import full_precision
from fdsml.measure import Stopwatch
from fdsml.seeds import replica_rank, step_seed

TRIPLET_MODES = ("batch", "explicit")
PER_FILTER_PARTS = ("triplet_accuracy", "nonzero_fraction")
"""Loss parts logged under the filter's name (``triplet_accuracy_same``): what the training triplets of that filter show."""
cross_entropy = full_precision(F.cross_entropy)


@full_precision
def soft_target_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against soft targets (one distribution per row), averaged over the batch."""
    return torch.sum(-targets * F.log_softmax(logits, dim=1), dim=1).mean()


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

    # Float32 on the CPU (fdsml.training.precision): its triplets order embedding distances whose differences are
    # finer than bf16 trunk features resolve; under bf16 it learned on rounding (docs/cpu.md, precision parity).
    cpu_bf16 = False

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


class CrossEntropyPATripletObjective(nn.Module):
    """Cross-entropy over the fractal classes plus ``weight`` x a PA-Triplet term, both on the same batch's embeddings.

    The class contrast cross-entropy learns fast, and the triplet term adds the descriptor's
    order. The class head (a linear layer on the embedding) is the objective's own, like proxies:
    the model stays an embedding model, so its checkpoints, validation, export and fine-tuning
    starting points are PA-Triplet's; the head trains at the model's rate with its weight decay
    and, like proxies, runs in float32 with the loss.
    """

    cpu_bf16 = False  # a margin on embedding distances, as PATripletObjective's: float32 on the CPU

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


class PairLossObjective(nn.Module):
    """A pair-based metric-learning loss (:mod:`fdsml.losses.pair`) on the class labels of the embeddings."""

    cpu_bf16 = False  # a margin on embedding distances, as PATripletObjective's: float32 on the CPU

    def __init__(self, loss: nn.Module):
        super().__init__()
        self.loss = loss

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        return self.loss(model(batch["image"]), batch["label"]), {}

    def param_groups(self) -> list[dict]:
        return []


class CrossEntropyObjective(nn.Module):
    """The FDSL baseline: cross-entropy over the fractal class labels on the same backbone."""

    def __init__(self, label_smoothing: float = 0.0):
        super().__init__()
        self.label_smoothing = label_smoothing

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        logits = model(batch["image"])
        loss = cross_entropy(logits, batch["label"], label_smoothing=self.label_smoothing)
        accuracy = (logits.detach().argmax(dim=1) == batch["label"]).float().mean()
        return loss, {"accuracy": accuracy}

    def param_groups(self) -> list[dict]:
        return []


class ProxyObjective(nn.Module):
    """Retrieval fine-tuning with a proxy loss of :mod:`fdsml.losses.proxy`.

    The proxies train at ``proxy_lr_multiplier`` x the lr.
    """

    # float32 on the CPU: a bf16 fine-tuning killed and resumed did not end on the uninterrupted run's
    # weights (tests/faults/test_kills.py), which a resumable run must; CUDA keeps its bf16 autocast.
    cpu_bf16 = False

    def __init__(self, loss: nn.Module, proxy_lr_multiplier: float = 100.0):
        super().__init__()
        self.loss = loss
        self.proxy_lr_multiplier = proxy_lr_multiplier

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        return self.loss(model(batch["image"]), batch["label"]), {}

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.loss.parameters()), "lr_multiplier": self.proxy_lr_multiplier, "weight_decay": 0.0}]
