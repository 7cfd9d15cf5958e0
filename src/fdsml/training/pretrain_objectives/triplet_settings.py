"""The settings every triplet objective shares: the margin loss, and the descriptor's ordering of the candidates.

Errors name the key relative to the section; :func:`fdsml.config.parse` puts ``pretrain.<objective>`` in front.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fdsml.config import ConfigError, require_positive

Filter = Literal["all", "each", "same", "diff"]


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
        """The keyword arguments of :class:`~fdsml.training.pretrain_objectives.pa_triplet.PATripletObjective` these settings give."""
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
