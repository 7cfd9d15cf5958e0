"""Stage 1 / Stage 2 of a timm trunk, and the joint forward that runs Stage 2 on the clean and the intervened view."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
from timm.models.resnet import ResNet
from timm.models.vision_transformer import VisionTransformer
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fdsml.config import ConfigError

RESNET_STAGES = ("layer1", "layer2", "layer3", "layer4")


def parse_split_point(split_at: str) -> tuple[str, int | None]:
    """``("auto", None)``, ``("resnet", stage index 0..3)`` or ``("vit", block index)``."""
    if split_at == "auto":
        return "auto", None
    if split_at in RESNET_STAGES:
        return "resnet", RESNET_STAGES.index(split_at)
    match = re.fullmatch(r"blocks\.(\d+)", split_at)
    if match:
        return "vit", int(match.group(1))
    raise ConfigError(f"split_at: {split_at!r} is not accepted; use auto, {', '.join(RESNET_STAGES)} or blocks.<i>")


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside its ``torch.compile`` and DistributedDataParallel wrappers, however nested
    (the loop hands objectives ``torch.compile(DDP(model))``); the model itself when unwrapped."""
    while True:
        if isinstance(model, DistributedDataParallel):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):  # torch.compile's OptimizedModule
            model = model._orig_mod
        else:
            return model


class StageSplit:
    """Stage 1 / Stage 2 of an ``EmbeddingModel`` whose trunk is a timm ResNet or VisionTransformer.

    ResNet: Stage 1 = stem .. ``layerK``, Stage 2 = the remaining layers, pooling, head.
    ViT: Stage 1 = patch embedding, position embedding .. block ``i``, Stage 2 = the remaining
    blocks, final norm, pooling, head. Both run inside the model's own forward
    (:meth:`joint_forward`), so no model code is copied. The activation between the stages is the trunk's own (ViT: tokens); :meth:`intervene`
    applies a map-to-map function to its spatial part (ViT: patch tokens on their grid, the
    class/register tokens left as they are).
    """

    def __init__(self, model: nn.Module, split_at: str = "auto"):
        self.model = unwrap(model)
        self.trunk = self.model.backbone
        kind, index = parse_split_point(split_at)
        if isinstance(self.trunk, ResNet):
            if kind == "vit":
                raise ValueError(f"split_at {split_at!r} names ViT blocks but the trunk is a ResNet")
            self.kind, self.index = "resnet", RESNET_STAGES.index("layer3") if index is None else index
            self.split_module = getattr(self.trunk, RESNET_STAGES[self.index])
        elif isinstance(self.trunk, VisionTransformer):
            if kind == "resnet":
                raise ValueError(f"split_at {split_at!r} names a ResNet stage but the trunk is a ViT")
            depth = len(self.trunk.blocks)
            self.kind, self.index = "vit", max(3 * depth // 4 - 1, 0) if index is None else index
            if not 0 <= self.index < depth:
                raise ValueError(f"split_at blocks.{self.index}: the ViT has blocks 0..{depth - 1}")
            self.split_module = self.trunk.blocks[self.index]
        else:
            raise ValueError(f"CouCE splits timm ResNet and VisionTransformer trunks, not {type(self.trunk).__name__}")
        self.grid: tuple[int, int] | None = None

    def _remember_grid(self, x: torch.Tensor) -> None:
        if self.kind == "vit":
            self.grid = tuple(self.trunk.patch_embed.dynamic_feat_size(tuple(x.shape[-2:])))

    def to_map(self, h: torch.Tensor) -> torch.Tensor:
        """The spatial part of the activation as (B, C, H, W)."""
        if self.kind == "resnet":
            return h
        patches = h[:, self.trunk.num_prefix_tokens :]
        return patches.transpose(1, 2).reshape(h.shape[0], h.shape[2], *self.grid)

    def from_map(self, feature_map: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """Put a (B, C, H, W) map back in the activation's layout (ViT: after ``like``'s prefix tokens)."""
        if self.kind == "resnet":
            return feature_map
        patches = feature_map.flatten(2).transpose(1, 2)
        return torch.cat([like[:, : self.trunk.num_prefix_tokens], patches], dim=1)

    def intervene(self, h: torch.Tensor, function: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """The activation with ``function`` applied to its spatial map."""
        return self.from_map(function(self.to_map(h)), h)

    def joint_forward(
        self, model: nn.Module, x: torch.Tensor, function: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """``model(x)`` with Stage 2 run on ``[h; intervene(h)]``: (2B, d), clean rows first.

        Stage 1 runs once. Going through ``model``'s own forward (a forward hook on the split
        module, removed on return) keeps DistributedDataParallel's gradient synchronisation.
        Every BatchNorm after the split normalises both views with the clean view's batch
        statistics, and only the clean view updates its running statistics
        (:func:`clean_view_batchnorm`): the clean rows are exactly ``model(x)``'s, and the
        statistics the saved model keeps are those of clean images alone.
        """
        self._remember_grid(x)
        after_split = False

        def both_views(module: nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor:
            nonlocal after_split
            after_split = True
            return torch.cat([output, self.intervene(output, function)], dim=0)

        def on_clean_statistics(norm: nn.modules.batchnorm._BatchNorm, original: Callable) -> Callable:
            return lambda rows: clean_view_batchnorm(norm, rows, original) if after_split else original(rows)

        norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        handle = self.split_module.register_forward_hook(both_views)
        try:
            for norm in norms:
                norm.forward = on_clean_statistics(norm, norm.forward)
            return model(x)
        finally:
            handle.remove()
            for norm in norms:
                vars(norm).pop("forward", None)


def clean_view_batchnorm(
    norm: nn.modules.batchnorm._BatchNorm, rows: torch.Tensor, forward: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """BatchNorm ``norm`` (its own ``forward``) on ``[clean; intervened]`` rows, the intervention kept out of its statistics.

    In training mode the clean half goes through ``forward`` alone (normalised by, and updating
    the running statistics from, its own batch statistics); the intervened half is normalised
    with those same clean batch statistics and updates nothing. In eval mode (frozen BatchNorm)
    both halves use the running statistics.
    """
    if not norm.training:
        return forward(rows)
    clean, intervened = rows.chunk(2)
    clean_out = forward(clean)
    axes = [0, *range(2, rows.ndim)]
    mean = clean.float().mean(axes, keepdim=True)
    variance = clean.float().var(axes, unbiased=False, keepdim=True)
    normalised = (intervened.float() - mean) * torch.rsqrt(variance + norm.eps)
    if norm.affine:
        shape = (1, -1) + (1,) * (rows.ndim - 2)
        normalised = normalised * norm.weight.view(shape) + norm.bias.view(shape)
    return torch.cat([clean_out, normalised.to(clean_out.dtype)])
