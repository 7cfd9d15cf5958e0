"""Models: timm backbones with embedding or classifier heads, built from a storable configuration."""

from fdsml.models.backbones import MODEL_REGISTRY, BackboneRecipe, backbone_recipe, register_backbone
from fdsml.models.checkpoint import (
    load_checkpoint,
    load_checkpoint_file,
    model_from_payload,
    model_payload,
    save_checkpoint,
)
from fdsml.models.heads import PROJECTIONS
from fdsml.models.network import HEADS, EmbeddingModel, ModelSpec, build_model

__all__ = [
    "HEADS",
    "MODEL_REGISTRY",
    "PROJECTIONS",
    "BackboneRecipe",
    "EmbeddingModel",
    "ModelSpec",
    "backbone_recipe",
    "build_model",
    "load_checkpoint",
    "load_checkpoint_file",
    "model_from_payload",
    "model_payload",
    "save_checkpoint",
    "register_backbone",
]
