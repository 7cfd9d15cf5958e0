"""Layer-wise CLS-to-patch attention of ViT checkpoints: where the class token reads from, block by block.

timm's attention may run fused (no probabilities kept), so the probabilities are recomputed
from what each block's ``attn.qkv`` layer outputs, with the block's own head split, q/k
normalisation and scale: softmax(q k^T * scale) over the keys, one (heads, N, N) matrix per
image and block. Row 0 is the class token's query; its columns after the prefix tokens
(class and register tokens) are the patches, laid out on the patch grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from fdsml.analysis.models import model_device
from fdsml.models import EmbeddingModel


def _probabilities_hook(attention: torch.nn.Module, store: list[torch.Tensor]):
    """A forward hook for ``attention.qkv`` that appends softmax(q k^T * scale) (B, heads, N, N) to ``store``."""

    def hook(module, inputs, qkv):
        batch, tokens, _ = qkv.shape
        split = qkv.reshape(batch, tokens, 3, attention.num_heads, attention.head_dim).permute(2, 0, 3, 1, 4)
        queries, keys = attention.q_norm(split[0]), attention.k_norm(split[1])
        logits = (queries.float() @ keys.float().transpose(-2, -1)) * attention.scale
        store.append(logits.softmax(dim=-1).cpu())

    return hook


def attention_probabilities(model: EmbeddingModel, images: torch.Tensor, batch_size: int = 32) -> np.ndarray:
    """(blocks, n, heads, N, N) attention probabilities of every block, shallow to deep; rows sum to one."""
    blocks = list(model.backbone.blocks)
    per_block: list[list[torch.Tensor]] = [[] for _ in blocks]
    handles = [block.attn.qkv.register_forward_hook(_probabilities_hook(block.attn, store)) for block, store in zip(blocks, per_block)]
    device = model_device(model)
    try:
        with torch.inference_mode():
            for start in range(0, images.shape[0], batch_size):
                model(images[start : start + batch_size].to(device))
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack([torch.cat(store) for store in per_block]).numpy()


def cls_to_patch_maps(probabilities: np.ndarray, num_prefix_tokens: int, grid: tuple[int, int]) -> np.ndarray:
    """(blocks, n, heads, grid_h, grid_w): the class token's attention to each patch."""
    if num_prefix_tokens < 1:
        raise ValueError("the model has no class token: CLS-to-patch attention is undefined")
    patches = probabilities[..., 0, num_prefix_tokens:]
    if patches.shape[-1] != grid[0] * grid[1]:
        raise ValueError(f"{patches.shape[-1]} patch tokens do not fill a {grid[0]} x {grid[1]} grid")
    return patches.reshape(*patches.shape[:-1], grid[0], grid[1])


def vit_cls_maps(model: EmbeddingModel, images: torch.Tensor) -> np.ndarray:
    """(blocks, n, grid_h, grid_w): CLS-to-patch attention of a timm ViT trunk, averaged over heads."""
    trunk = model.backbone
    probabilities = attention_probabilities(model, images)
    return cls_to_patch_maps(probabilities, trunk.num_prefix_tokens, tuple(trunk.patch_embed.grid_size)).mean(axis=2)


@dataclass(frozen=True)
class AttentionPanel:
    """One ViT checkpoint's maps (blocks, n, gh, gw) and the images they belong to (n, H, W, 3)."""

    name: str
    display: np.ndarray
    maps: np.ndarray


def attention_figure(panels: list[AttentionPanel], n_show: int, *, dataset: str) -> Figure:
    """Rows: the images, then blocks 1 (shallow) to L (deep); columns: ``n_show`` images per checkpoint."""
    depth = max(panel.maps.shape[0] for panel in panels)
    shows = [min(n_show, panel.display.shape[0]) for panel in panels]
    figure = Figure(figsize=(1.45 * sum(shows) + 1.0, 1.4 * (depth + 1) + 0.6), layout="constrained")
    axes = figure.subplots(depth + 1, sum(shows), squeeze=False)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_frame_on(False)
    column = 0
    for panel, shown in zip(panels, shows):
        height, width = panel.display.shape[1:3]
        extent = (-0.5, width - 0.5, height - 0.5, -0.5)
        for k in range(shown):
            axes[0, column].imshow(panel.display[k], extent=extent)
            axes[0, column].set_title(f"{panel.name}: image {k + 1}", fontsize="small")
            for block in range(panel.maps.shape[0]):
                ax = axes[block + 1, column]
                ax.imshow(panel.display[k].mean(axis=-1), cmap="gray", extent=extent)
                ax.imshow(panel.maps[block, k], cmap="inferno", alpha=0.65, extent=extent, interpolation="nearest")
            column += 1
    axes[0, 0].set_ylabel("image")
    for block in range(depth):
        axes[block + 1, 0].set_ylabel(f"block {block + 1}")
    figure.suptitle(
        f"CLS-to-patch attention on {dataset}, mean over heads\nblocks shallow (top) to deep, each map on its own colour scale",
        fontsize="medium",
    )
    return figure
