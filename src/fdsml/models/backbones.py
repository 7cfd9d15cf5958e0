"""Backbone recipes on timm (docs/method.md §4.1), registered by name.

A recipe is a small description, not model code: which timm architecture to create, which
embedding head replaces its classifier, and the head's sizes. Adding a backbone is one
decorated function returning a :class:`BackboneRecipe`; :func:`create_trunk` is the one
shared builder. No weights are ever downloaded (``pretrained=False``; ``HF_HUB_OFFLINE``
defaults to 1 so that timm never reaches for the network).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import timm
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass(frozen=True)
class BackboneRecipe:
    """How to build one registered backbone and its default embedding head.

    ``needs_img_size``: the architecture fixes its input size at creation (ViT position
    embeddings), so ``img_size`` is passed to timm; convolutional trunks take any size.
    """

    timm_name: str
    projection: str
    embedding_dim: int
    hidden_dim: int | None = None
    default_img_size: int = 224
    needs_img_size: bool = False
    timm_kwargs: Mapping[str, Any] = field(default_factory=dict)


MODEL_REGISTRY: dict[str, BackboneRecipe] = {}
"""Registered backbones by name."""


def register_backbone(name: str) -> Callable[[Callable[[], BackboneRecipe]], Callable[[], BackboneRecipe]]:
    """Decorator: register the recipe returned by the decorated function under ``name``."""

    def register(factory: Callable[[], BackboneRecipe]) -> Callable[[], BackboneRecipe]:
        if name in MODEL_REGISTRY:
            raise ValueError(f"backbone {name!r} is already registered")
        MODEL_REGISTRY[name] = factory()
        return factory

    return register


def backbone_recipe(name: str) -> BackboneRecipe:
    """The recipe registered as ``name``; a ValueError naming the accepted names otherwise."""
    if name not in MODEL_REGISTRY:
        raise ValueError(f"unknown backbone {name!r}; choose one of {', '.join(sorted(MODEL_REGISTRY))}")
    return MODEL_REGISTRY[name]


def create_trunk(recipe: BackboneRecipe, *, img_size: int, in_chans: int, overrides: Mapping[str, Any]) -> nn.Module:
    """The timm model without its classifier: ``forward`` returns pooled features (``num_features``)."""
    kwargs = {**recipe.timm_kwargs, **overrides}
    if recipe.needs_img_size:
        kwargs["img_size"] = img_size
    return timm.create_model(recipe.timm_name, pretrained=False, num_classes=0, in_chans=in_chans, **kwargs)


@register_backbone("resnet18")
def resnet18() -> BackboneRecipe:
    """ResNet-18 with a 128-d linear embedding: the small CPU member of the ResNet family."""
    return BackboneRecipe("resnet18", projection="linear", embedding_dim=128, default_img_size=64)


@register_backbone("resnet50")
def resnet50() -> BackboneRecipe:
    """ResNet-50 whose classifier becomes a 512-d linear embedding."""
    return BackboneRecipe("resnet50", projection="linear", embedding_dim=512)


@register_backbone("vit_tiny_patch16_224")
def vit_tiny_patch16_224() -> BackboneRecipe:
    """ViT-Tiny/16 with the MLP projection 192 -> 128."""
    return BackboneRecipe(
        "vit_tiny_patch16_224", projection="mlp", embedding_dim=128, hidden_dim=192, needs_img_size=True
    )


@register_backbone("vit_base_patch16_224")
def vit_base_patch16_224() -> BackboneRecipe:
    """ViT-Base/16 with the MLP projection 768 -> 256."""
    return BackboneRecipe(
        "vit_base_patch16_224", projection="mlp", embedding_dim=256, hidden_dim=768, needs_img_size=True
    )


@register_backbone("vit_tiny_patch4")
def vit_tiny_patch4() -> BackboneRecipe:
    """ViT-Tiny with 4 x 4 patches for 32-64 px inputs (64-256 tokens): the small CPU member of the ViT family.

    ``patch_size`` and ``depth`` can be overridden through ``build_model(..., patch_size=8, depth=6)``.
    """
    return BackboneRecipe(
        "vit_tiny_patch16_224",
        projection="mlp",
        embedding_dim=128,
        hidden_dim=192,
        default_img_size=32,
        needs_img_size=True,
        timm_kwargs={"patch_size": 4},
    )
