"""``pretrain.validation``'s settings: read by pre-training's configuration and by the validation it runs.

They live below both :mod:`fdsml.training.pretrain` and :mod:`fdsml.evaluation.pretrain_validation`,
so the two import them downwards, never each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from fdsml import fingerprints
from fdsml.config import ConfigError, require_positive


@dataclass(frozen=True)
class ProbeSettings:
    """``pretrain.validation.probe``: the real retrieval dataset the frozen trunk is probed on."""

    dataset: str = "omniglot"
    root: str | None = None
    image_size: int | None = None  # None: the model's input size
    crop_fraction: float = 0.875
    max_images: int | None = None  # a seeded subset of the test images (and of the queries and the gallery); None: all

    def __post_init__(self):
        for key in ("image_size", "max_images"):
            if getattr(self, key) is not None:
                require_positive(f"pretrain.validation.probe.{key}", getattr(self, key))


@dataclass(frozen=True)
class ValidationSettings:
    """``pretrain.validation``: how often, on how many held-out triplets and images, and the probe (None: none)."""

    every: int | None = None  # steps between validations (also at the end); None or 0: no validation
    triplets: int = 1000  # fixed held-out triplets per filter
    max_images: int = 512  # held-out images read from each part (a seeded subset beyond that)
    batch_size: int = fingerprints.non_defining(default=256)  # forward batches: cannot change the metrics
    probe: ProbeSettings | None = None

    def __post_init__(self):
        if self.every is not None and self.every < 0:
            raise ConfigError(f"pretrain.validation.every: must be >= 0 (0 or null disables), got {self.every}")
        for key in ("triplets", "max_images", "batch_size"):
            require_positive(f"pretrain.validation.{key}", getattr(self, key))

    @property
    def enabled(self) -> bool:
        return bool(self.every)
