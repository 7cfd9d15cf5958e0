"""Backbone recipes on timm (docs/method.md §4.1): the registered ones, and any name ``timm.list_models()`` gives.

A recipe is a small description, not model code: which timm architecture to create, which
embedding head replaces its classifier, and the head's sizes. Adding a backbone with its own
head sizes is one decorated function returning a :class:`BackboneRecipe`; any other timm name
gets a recipe read from the model itself (:func:`timm_recipe`): its family (a transformer when
it holds attention blocks), whether timm fixes its input size at creation (ViTs' ``img_size``)
and its usual input size. :func:`create_trunk` is the one shared builder. No weights are ever
downloaded (``pretrained=False``; ``HF_HUB_OFFLINE`` defaults to 1 so that timm never reaches
for the network).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import timm
import torch
from torch import nn

from fdsml.config import ConfigError

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass(frozen=True)
class BackboneRecipe:
    """How to build one registered backbone and its default embedding head.

    ``needs_img_size``: the architecture fixes its input size at creation (ViT position
    embeddings), so ``img_size`` is passed to timm; convolutional trunks take any size.
    ``hidden_dim`` None with the ``mlp`` projection: the trunk's own width (``num_features``).
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


Family = Literal["convolutional", "transformer"]


def backbone_recipe(name: str) -> BackboneRecipe:
    """The recipe registered as ``name``, or read from timm's model of that name; a ValueError naming the closest
    accepted names otherwise."""
    if name in MODEL_REGISTRY:
        return MODEL_REGISTRY[name]
    if name in _timm_names():
        return timm_recipe(name)
    closest = difflib.get_close_matches(name, list(dict.fromkeys([*MODEL_REGISTRY, *sorted(_timm_names())])), n=5, cutoff=0.6)
    hint = f"the closest: {', '.join(closest)}" if closest else f"registered: {', '.join(sorted(MODEL_REGISTRY))}"
    raise ValueError(f"unknown backbone {name!r}; give a registered name or any name timm.list_models() gives ({hint})")


def require_backbone(key: str, name: str) -> None:
    """A ConfigError naming ``key`` when ``name`` is no backbone (:func:`backbone_recipe`'s message)."""
    try:
        backbone_recipe(name)
    except ValueError as error:
        raise ConfigError(f"{key}: {error}") from None


def backbone_family(name: str) -> Family:
    """``transformer`` when the backbone's trunk holds attention blocks (ViT, DeiT, Swin, CoAtNet...), else
    ``convolutional``: the family decides the pre-training optimizer (docs/pretrain.md)."""
    return _timm_shape(backbone_recipe(name).timm_name)[0]


def timm_recipe(name: str) -> BackboneRecipe:
    """A recipe for timm's ``name``: a linear 128-d embedding on a convolutional trunk, the MLP projection
    (the trunk's width -> 128) on a transformer, at timm's usual input size for it."""
    family, takes_img_size, img_size = _timm_shape(name)
    projection = "mlp" if family == "transformer" else "linear"
    return BackboneRecipe(name, projection=projection, embedding_dim=128, default_img_size=img_size, needs_img_size=takes_img_size)


@functools.cache
def _timm_names() -> frozenset[str]:
    return frozenset(timm.list_models())


@functools.cache
def _timm_shape(timm_name: str) -> tuple[Family, bool, int]:
    """(family, whether the model takes ``img_size`` at creation, its usual input size), read from the model built on
    the meta device (no memory, no weights)."""
    model = _meta_model(timm_name)
    family: Family = "transformer" if any("Attention" in type(m).__name__ for m in model.modules()) else "convolutional"
    takes_img_size = "img_size" in inspect.signature(type(model).__init__).parameters
    return family, takes_img_size, int(model.pretrained_cfg.get("input_size", (3, 224, 224))[-1])


@functools.cache
def _meta_model(timm_name: str) -> nn.Module:
    """timm's model ``timm_name`` built on the meta device (no memory, no weights), once."""
    with torch.device("meta"):
        return timm.create_model(timm_name, pretrained=False, num_classes=0)


PLACED_BY_FDSML = frozenset({"self", "num_classes", "in_chans", "img_size", "device", "dtype"})
"""Parameters of a timm architecture that fdsml sets itself (the head, the input, where the model lives)."""


def architecture_arguments(name: str) -> frozenset[str]:
    """What backbone ``name``'s architecture class itself takes (depth, patch_size, drop_path_rate...), less
    :data:`PLACED_BY_FDSML`: never ``timm.create_model``'s loading arguments (``checkpoint_path``, ``pretrained_cfg``...)."""
    architecture = type(_meta_model(backbone_recipe(name).timm_name))
    return frozenset(inspect.signature(architecture.__init__).parameters) - PLACED_BY_FDSML


def create_trunk(recipe: BackboneRecipe, *, img_size: int, in_chans: int, overrides: Mapping[str, Any]) -> nn.Module:
    """The timm model without its classifier: ``forward`` returns pooled features (``num_features``)."""
    kwargs = {**recipe.timm_kwargs, **overrides}
    if recipe.needs_img_size:
        kwargs["img_size"] = img_size
    try:
        return timm.create_model(recipe.timm_name, pretrained=False, num_classes=0, in_chans=in_chans, **kwargs)
    except (TypeError, ValueError, AssertionError) as error:  # timm's own checks of sizes and arguments
        raise ValueError(
            f"timm cannot build {recipe.timm_name} with img_size {img_size}, in_chans {in_chans} and {dict(overrides)}: "
            f"{error}; choose an image size the architecture takes (e.g. a multiple of its patch or window) or other overrides"
        ) from error


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
