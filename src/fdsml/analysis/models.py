"""The models being explained: rebuilt from checkpoint payloads, told apart by family, embedded.

A checkpoint with the embedding head is explained through its embedding; one with the
classifier head (the FDSL baseline) through its pooled trunk features, since its logits
range over the pre-training's fractal classes and mean nothing on other images.
"""

from __future__ import annotations

import numpy as np
import torch
from timm.models.resnet import ResNet
from timm.models.vision_transformer import VisionTransformer

from fdsml.models import EmbeddingModel, build_model


def untrained_copy(model: EmbeddingModel, seed: int) -> EmbeddingModel:
    """The same architecture with fresh random weights drawn from ``seed`` (a reference that learnt nothing)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        copy = build_model(**model.config)
    return copy.to(model_device(model)).eval()


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def is_resnet(model: EmbeddingModel) -> bool:
    """A timm ResNet trunk (Grad-CAM applies)."""
    return isinstance(model.backbone, ResNet)


def is_vit(model: EmbeddingModel) -> bool:
    """A timm Vision Transformer trunk (CLS-to-patch attention applies)."""
    return isinstance(model.backbone, VisionTransformer)


def embedding_output(model: EmbeddingModel, images: torch.Tensor) -> torch.Tensor:
    """The embedding (embedding head) or the pooled trunk features (classifier head), with gradients."""
    return model(images) if model.spec.head == "embedding" else model.features(images)


def embed(model: EmbeddingModel, images: torch.Tensor, batch_size: int = 256) -> np.ndarray:
    """``embedding_output`` of every image, batch by batch on the model's device, as float32 (n, d)."""
    device = model_device(model)
    parts = []
    with torch.inference_mode():
        for start in range(0, images.shape[0], batch_size):
            batch = images[start : start + batch_size].to(device)
            parts.append(embedding_output(model, batch).float().cpu())
    return torch.cat(parts).numpy()
