"""A timm trunk plus a head, built from a plain, storable configuration.

``build_model(**model.config)`` rebuilds an identical architecture, so a checkpoint stores
``model.config`` next to the weights and nothing else is needed to load it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from fdsml.losses.precision import full_precision
from fdsml.models.backbones import backbone_recipe, create_trunk
from fdsml.models.heads import PROJECTIONS, classifier
from fdsml.models.normalisation import INPUT_MEAN, INPUT_STD, Normalise, channel_values

HEADS = ("embedding", "classifier")


@dataclass(frozen=True)
class ModelSpec:
    """Everything that defines a model's architecture, with the registry's defaults filled in.

    ``embedding_dim``/``hidden_dim`` are set only for the embedding head, ``num_classes`` only
    for the classifier head. ``overrides`` are extra timm arguments (e.g. ``patch_size``, ``depth``,
    ``drop_path_rate``); they must be JSON-serialisable to travel in a checkpoint.
    ``input_mean``/``input_std``: the input normalisation the model applies to images in [0, 1]
    (:mod:`fdsml.models.normalisation`), one value per input channel.
    """

    name: str
    head: Literal["embedding", "classifier"] = "embedding"
    num_classes: int | None = None
    embedding_dim: int | None = None
    hidden_dim: int | None = None
    img_size: int = 224
    in_chans: int = 3
    overrides: dict[str, Any] = field(default_factory=dict)
    input_mean: tuple[float, ...] = INPUT_MEAN
    input_std: tuple[float, ...] = INPUT_STD

    @classmethod
    def resolve(
        cls,
        name: str,
        *,
        head: str = "embedding",
        num_classes: int | None = None,
        embedding_dim: int | None = None,
        hidden_dim: int | None = None,
        img_size: int | None = None,
        in_chans: int = 3,
        overrides: dict[str, Any] | None = None,
        input_mean: tuple[float, ...] = INPUT_MEAN,
        input_std: tuple[float, ...] = INPUT_STD,
    ) -> ModelSpec:
        """Validate the choices and fill the unset ones from the backbone's recipe."""
        recipe = backbone_recipe(name)
        if head not in HEADS:
            raise ValueError(f"unknown head {head!r}; choose one of {', '.join(HEADS)}")
        img_size = recipe.default_img_size if img_size is None else img_size
        if img_size < 1 or in_chans < 1:
            raise ValueError(f"img_size and in_chans must be positive, got {img_size} and {in_chans}")
        if head == "classifier":
            if num_classes is None or num_classes < 1:
                raise ValueError(f"the classifier head needs a positive num_classes, got {num_classes}")
            embedding_dim = hidden_dim = None
        else:
            num_classes = None
            embedding_dim = recipe.embedding_dim if embedding_dim is None else embedding_dim
            hidden_dim = recipe.hidden_dim if hidden_dim is None else hidden_dim
            if embedding_dim < 1 or (hidden_dim is not None and hidden_dim < 1):
                raise ValueError(f"embedding_dim and hidden_dim must be positive, got {embedding_dim}, {hidden_dim}")
        input_mean, input_std = (channel_values(v, in_chans, k) for k, v in (("input_mean", input_mean), ("input_std", input_std)))
        return cls(name, head, num_classes, embedding_dim, hidden_dim, img_size, in_chans, dict(overrides or {}), input_mean, input_std)

    def to_dict(self) -> dict[str, Any]:
        """Keyword arguments of :func:`build_model` (``overrides`` spread out) that rebuild this model."""
        config = asdict(self) | {"input_mean": list(self.input_mean), "input_std": list(self.input_std)}
        return {**{k: v for k, v in config.items() if k != "overrides"}, **config["overrides"]}


class EmbeddingModel(nn.Module):
    """``normalise`` (the recorded input normalisation), ``backbone`` (timm trunk, pooled features), ``head``.

    It takes images in [0, 1]: every consumer feeds it the same way, whatever normalisation it records.
    ``float32_head`` (not a weight: the training loop sets it from the run's precision,
    :mod:`fdsml.training.precision`) computes the head in float32 on the trunk's features cast to float32,
    whatever autocast the trunk runs under.
    """

    float32_head: bool = False

    def __init__(self, spec: ModelSpec):
        super().__init__()
        recipe = backbone_recipe(spec.name)
        self.spec = spec
        self.normalise = Normalise(spec.input_mean, spec.input_std, spec.in_chans)
        self.backbone = create_trunk(recipe, img_size=spec.img_size, in_chans=spec.in_chans, overrides=spec.overrides)
        self.num_features: int = self.backbone.num_features
        if spec.head == "classifier":
            self.head = classifier(self.num_features, spec.num_classes)
            self.output_dim = spec.num_classes
        else:
            hidden = spec.hidden_dim if spec.hidden_dim is not None or recipe.projection != "mlp" else self.num_features
            self.head = PROJECTIONS[recipe.projection](self.num_features, spec.embedding_dim, hidden)
            self.output_dim = spec.embedding_dim

    @property
    def config(self) -> dict[str, Any]:
        """The plain dict that rebuilds this architecture: ``build_model(**model.config)``."""
        return self.spec.to_dict()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled trunk features of images in [0, 1], before the head (``num_features`` wide)."""
        return self.backbone(self.normalise(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The embedding (embedding head) or the class logits (classifier head) of images in [0, 1]."""
        head = full_precision(self.head) if self.float32_head else self.head
        return head(self.features(x))


def build_model(
    name: str,
    *,
    head: str = "embedding",
    num_classes: int | None = None,
    embedding_dim: int | None = None,
    hidden_dim: int | None = None,
    img_size: int | None = None,
    in_chans: int = 3,
    input_mean: tuple[float, ...] = INPUT_MEAN,
    input_std: tuple[float, ...] = INPUT_STD,
    **overrides: Any,
) -> EmbeddingModel:
    """A backbone (registered, or any timm name) with an embedding head (default) or a classifier head.

    Unset sizes come from the backbone's recipe; ``overrides`` go to ``timm.create_model``.
    Raises ValueError for an unknown backbone or head, naming the accepted ones.
    """
    spec = ModelSpec.resolve(
        name,
        head=head,
        num_classes=num_classes,
        embedding_dim=embedding_dim,
        hidden_dim=hidden_dim,
        img_size=img_size,
        in_chans=in_chans,
        overrides=overrides,
        input_mean=input_mean,
        input_std=input_std,
    )
    return EmbeddingModel(spec)
