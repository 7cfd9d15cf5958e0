"""``params:analysis``: which checkpoints to explain and how each picture is drawn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fdsml.config import ConfigError, parse, require_positive, require_seed
from fdsml.data.retrieval_datasets import reader_module
from fdsml.seeds import generator


@dataclass(frozen=True)
class CheckpointEntry:
    """A model to explain: ``path`` to an fdsml checkpoint, or null for the catalog's ``pretrained_model``."""

    name: str
    path: str | None = None


@dataclass(frozen=True)
class EmbeddingMapSettings:
    """UMAP of ``n_classes`` random classes (all if fewer) and one class's perturbation path."""

    n_classes: int = 10
    max_instances_per_class: int = 50
    sweep_points: int = 17
    thumbnails: int = 5
    n_neighbors: int = 15

    def __post_init__(self):
        for key in ("n_classes", "max_instances_per_class", "sweep_points", "thumbnails"):
            require_positive(f"analysis.embedding_map.{key}", getattr(self, key))
        if self.n_neighbors < 2:
            raise ConfigError(f"analysis.embedding_map.n_neighbors: must be at least 2, got {self.n_neighbors}")


@dataclass(frozen=True)
class TrajectorySettings:
    """Interpolation between two codes: how many alphas, which 2-D projection, how many renderings shown."""

    n_alphas: int = 64
    projection: Literal["pca", "umap"] = "pca"
    thumbnails: int = 5

    def __post_init__(self):
        if self.n_alphas < 3:
            raise ConfigError(f"analysis.trajectory.n_alphas: a trajectory needs at least 3 alphas, got {self.n_alphas}")
        require_positive("analysis.trajectory.thumbnails", self.thumbnails)


@dataclass(frozen=True)
class RealImageSettings:
    """Real images for Grad-CAM and attention: a retrieval dataset's split (digits ships offline)."""

    dataset: str = "digits"
    root: str | None = None
    split: Literal["train", "test", "query", "gallery"] = "test"
    n_images: int = 200

    def __post_init__(self):
        require_positive("analysis.real_images.n_images", self.n_images)


@dataclass(frozen=True)
class GradCamSettings:
    """``reference``: a checkpoint name, or null for an untrained network of each model's architecture.

    The untrained network is drawn from ``analysis.seed`` exactly as pre-training draws its
    initial weights, so with the same seed it is the checkpoint's own starting point.
    """

    reference: str | None = None
    layer: str | None = None
    n_show: int = 6
    bins: int = 20

    def __post_init__(self):
        require_positive("analysis.gradcam.n_show", self.n_show)
        require_positive("analysis.gradcam.bins", self.bins)


@dataclass(frozen=True)
class AttentionSettings:
    """How many images each ViT checkpoint's attention is shown on."""

    n_show: int = 4

    def __post_init__(self):
        require_positive("analysis.attention.n_show", self.n_show)


@dataclass(frozen=True)
class GridSettings:
    """Sample grid size and triplets shown per candidate filter."""

    n_classes: int = 8
    n_instances: int = 8
    triplets_per_filter: int = 3

    def __post_init__(self):
        for key in ("n_classes", "n_instances", "triplets_per_filter"):
            require_positive(f"analysis.grids.{key}", getattr(self, key))


@dataclass(frozen=True)
class AnalysisConfig:
    """Everything the analysis pipeline draws."""

    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    batch_size: int = 128
    checkpoints: tuple[CheckpointEntry, ...] = (CheckpointEntry("fdsml"),)
    embedding_map: EmbeddingMapSettings = field(default_factory=EmbeddingMapSettings)
    trajectory: TrajectorySettings = field(default_factory=TrajectorySettings)
    real_images: RealImageSettings = field(default_factory=RealImageSettings)
    gradcam: GradCamSettings = field(default_factory=GradCamSettings)
    attention: AttentionSettings = field(default_factory=AttentionSettings)
    grids: GridSettings = field(default_factory=GridSettings)

    def __post_init__(self):
        require_seed("analysis.seed", self.seed)
        require_positive("analysis.batch_size", self.batch_size)
        names = [entry.name for entry in self.checkpoints]
        if not names:
            raise ConfigError("analysis.checkpoints: list at least one checkpoint ({name, path})")
        if len(set(names)) != len(names):
            raise ConfigError(f"analysis.checkpoints: names must be unique, got {names}")
        if self.gradcam.reference is not None and self.gradcam.reference not in names:
            raise ConfigError(f"analysis.gradcam.reference: {self.gradcam.reference!r} is not one of the checkpoints {names}")

    def plugin_modules(self) -> tuple[str, ...]:
        """The module of the reader of the real images' dataset (:mod:`fdsml.plugins`)."""
        return (reader_module(self.real_images.dataset),)

    def rng(self, stream: int) -> np.random.Generator:
        """Independent generator per picture (0 map classes, 1 code pair, 2 real images, 3 triplets)."""
        return generator(self.seed, "analysis", stream)


def parse_analysis_params(params: dict) -> AnalysisConfig:
    """Validate ``params:analysis``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(AnalysisConfig, params, "analysis")
