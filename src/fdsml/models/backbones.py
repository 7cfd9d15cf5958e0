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

from fdsml.config import ConfigError, constructor_keywords, refuse_unknown_keyword

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


FDSML_MODEL_KEYWORDS = frozenset({"in_chans", "input_mean", "input_std"})
"""``build_model``'s own keywords an override may set: the input channels and the recorded input normalisation."""
SET_BY_FDSML = frozenset({"name", "head", "num_classes", "embedding_dim", "hidden_dim", "img_size", "pretrained"})
"""What fdsml gives every model itself (from a section's image size, embedding and head settings): never an override."""


def check_overrides(backbone: str, overrides: Mapping[str, Any], key: str) -> None:
    """Refuse, before any work, an override (``key``: the block's dotted key) that ``backbone``'s timm model does not
    take, naming the closest it does. The names come from the model class's signature (and its bases'),
    ``timm.create_model``'s and its builder's; a name outside them (a model that passes ``**kwargs`` on to its
    blocks or config may still take it) is tried on the meta device, which costs no memory and loads no weights."""
    recipe = backbone_recipe(backbone)
    for name in overrides:
        if name in SET_BY_FDSML:
            raise ConfigError(f"{key}.{name}: fdsml sets {name} itself (from the section's image size, embedding and head settings); remove it")
    accepted = _timm_keywords(recipe.timm_name) | FDSML_MODEL_KEYWORDS
    for name in (name for name in overrides if name not in accepted):
        if not _takes_on_meta(recipe, name, overrides[name]):
            model_class = type(_meta_model(recipe.timm_name))
            own = constructor_keywords(model_class) - SET_BY_FDSML | FDSML_MODEL_KEYWORDS
            listed = sorted(own) + ["and timm.create_model's"]
            raise refuse_unknown_keyword(name, accepted, key, f"timm's {recipe.timm_name} ({model_class.__name__})", listed)


@functools.cache
def _meta_model(timm_name: str) -> nn.Module:
    """timm's model ``timm_name`` built on the meta device (no memory, no weights), once."""
    with torch.device("meta"):
        return timm.create_model(timm_name, pretrained=False, num_classes=0)


@functools.cache
def _timm_keywords(timm_name: str) -> frozenset[str]:
    """The keywords ``timm.create_model(timm_name, ...)`` names: the model class's, the entrypoint's, the factory's and
    the builder's (``pretrained`` and the model's name are fdsml's)."""
    named = set(constructor_keywords(type(_meta_model(timm_name))))
    for function in (timm.create_model, timm.models.build_model_with_cfg, timm.models.model_entrypoint(timm_name)):
        named |= {p.name for p in inspect.signature(function).parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return frozenset(named - {"model_name", "model_cls", "variant", "kwargs"} - SET_BY_FDSML)


def _takes_on_meta(recipe: BackboneRecipe, name: str, value: Any) -> bool:
    """Whether timm builds ``recipe``'s model with ``name`` set, on the meta device: only its refusal of the keyword
    counts (a value it refuses is the real build's to report, at the real image size)."""
    try:
        with torch.device("meta"):
            timm.create_model(recipe.timm_name, pretrained=False, num_classes=0, **{**recipe.timm_kwargs, name: value})
    except TypeError as error:
        return not ("unexpected keyword argument" in str(error) and repr(name) in str(error))
    except Exception:  # noqa: BLE001 - any other refusal is about a value, not the name
        return True
    return True


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
