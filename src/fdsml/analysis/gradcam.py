"""Grad-CAM for ResNet checkpoints: where in an image does the embedding look?

An embedding model has no class logit, so the explained score is built from class prototypes
(the normalised mean of the unit embeddings of each class among the explained images): the
cosine to the image's own prototype minus the mean cosine to the other classes' prototypes,
how much more the image points to its own class than to the others.
Grad-CAM (Selvaraju et al. 2017): weight each channel of the last convolutional stage by the
spatial mean of the score's gradient, sum, keep the positive part, upsample to the input.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from fdsml.analysis.models import embedding_output, model_device
from fdsml.models import EmbeddingModel

Targets = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""(embeddings of a batch (B, D), the batch's image indices (B,)) -> the score to explain per image (B,)."""


def last_conv_stage(model: EmbeddingModel) -> str:
    """Name of the trunk's deepest feature stage (``layer4`` for timm ResNets)."""
    return model.backbone.feature_info[-1]["module"]


def class_prototypes(embeddings: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(classes, prototypes)``: per class the normalised mean of its unit-length embeddings."""
    unit = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
    classes = np.unique(labels)
    means = np.stack([unit[labels == c].mean(axis=0) for c in classes])
    return classes, means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)


def prototype_targets(embeddings: np.ndarray, labels: np.ndarray) -> Targets:
    """Score of image i: cosine to its own class prototype minus the mean cosine to the other prototypes.

    Subtracting the other classes removes what every image shares (the background, the
    overall image statistics), as a softmax logit does; the plain cosine to the own prototype
    also rewards that shared part, and its maps light up the background. With a single class
    the score is the plain cosine.
    """
    labels = np.asarray(labels)
    classes, prototypes = class_prototypes(np.asarray(embeddings, dtype=np.float64), labels)
    table = torch.from_numpy(prototypes).float()
    own_class = torch.from_numpy(np.searchsorted(classes, labels))
    n_others = max(len(classes) - 1, 1)

    def score(batch_embeddings: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        cosines = F.normalize(batch_embeddings.float(), dim=1) @ table.to(batch_embeddings.device).T
        own = cosines.gather(1, own_class[indices.cpu()].to(cosines.device).view(-1, 1))[:, 0]
        if len(classes) == 1:
            return own
        return own - (cosines.sum(dim=1) - own) / n_others

    return score


def grad_cam(
    model: EmbeddingModel, images: torch.Tensor, targets: Targets, *, layer: str | None = None, batch_size: int = 64
) -> np.ndarray:
    """Grad-CAM maps of ``images`` for the score ``targets``: (n, H, W) float32, each scaled to max 1.

    ``layer`` names a module of the trunk (default: its last convolutional stage). A map whose
    positive part is empty stays all zero.
    """
    layer = layer or last_conv_stage(model)
    modules = dict(model.backbone.named_modules())
    if layer not in modules:
        raise ValueError(f"the trunk has no module {layer!r}")
    captured: list[torch.Tensor] = []
    handle = modules[layer].register_forward_hook(lambda module, inputs, output: captured.append(output))
    device = model_device(model)
    maps = []
    try:
        for start in range(0, images.shape[0], batch_size):
            batch = images[start : start + batch_size].to(device)
            indices = torch.arange(start, start + batch.shape[0])
            captured.clear()
            with torch.enable_grad():
                score = targets(embedding_output(model, batch), indices)
                (gradients,) = torch.autograd.grad(score.sum(), captured[0])
            activations = captured[0].detach()
            weights = gradients.mean(dim=(2, 3), keepdim=True)
            cam = F.relu((weights * activations).sum(dim=1, keepdim=True))
            cam = F.interpolate(cam, size=batch.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
            peak = cam.amax(dim=(1, 2), keepdim=True)
            maps.append(torch.where(peak > 0, cam / peak.clamp_min(1e-12), torch.zeros_like(cam)).float().cpu())
    finally:
        handle.remove()
    return torch.cat(maps).numpy()


def resize_maps(maps: np.ndarray, size: int) -> np.ndarray:
    """Maps brought to ``size`` x ``size`` (bilinear), to compare models with different input sizes."""
    if maps.shape[-1] == size and maps.shape[-2] == size:
        return maps
    tensor = torch.from_numpy(np.ascontiguousarray(maps, dtype=np.float32)).unsqueeze(1)
    return F.interpolate(tensor, size=(size, size), mode="bilinear", align_corners=False)[:, 0].numpy()


def map_cosine_similarity(maps_a: np.ndarray, maps_b: np.ndarray) -> np.ndarray:
    """Per image, the cosine similarity of two models' maps (flattened); NaN where either map is empty."""
    a = np.asarray(maps_a, dtype=np.float64).reshape(len(maps_a), -1)
    b = np.asarray(maps_b, dtype=np.float64).reshape(len(maps_b), -1)
    if a.shape != b.shape:
        raise ValueError(f"maps of different shapes: {np.shape(maps_a)} and {np.shape(maps_b)}")
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norms > 0, (a * b).sum(axis=1) / norms, np.nan)


def gradcam_figure(display: np.ndarray, maps: dict[str, np.ndarray], n_show: int, *, dataset: str) -> Figure:
    """Top row: the images; one row per model: its Grad-CAM map over the image."""
    n_show = min(n_show, len(display))
    figure = Figure(figsize=(1.7 * n_show + 1.2, 1.8 * (len(maps) + 1)), layout="constrained")
    axes = figure.subplots(len(maps) + 1, n_show, squeeze=False)
    height, width = display.shape[1:3]
    extent = (-0.5, width - 0.5, height - 0.5, -0.5)
    for column in range(n_show):
        axes[0, column].imshow(display[column], extent=extent)
        for row, (name, model_maps) in enumerate(maps.items(), start=1):
            ax = axes[row, column]
            ax.imshow(display[column].mean(axis=-1), cmap="gray", extent=extent)
            shown = ax.imshow(model_maps[column], cmap="jet", alpha=0.5, vmin=0, vmax=1, extent=extent)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].set_ylabel("image")
    for row, name in enumerate(maps, start=1):
        axes[row, 0].set_ylabel(name)
    figure.colorbar(shown, ax=axes[1:, :].ravel().tolist(), shrink=0.8, label="Grad-CAM (scaled to max 1)")
    figure.suptitle(
        f"Grad-CAM of the embedding's cosine to its class prototype minus that to the other classes' ({dataset})",
        fontsize="medium",
    )
    return figure


def similarity_figure(similarities: dict[str, np.ndarray], reference: str, bins: int = 20) -> Figure:
    """Histogram of each model's per-image map cosine to the reference's maps, means dashed and in the legend."""
    figure = Figure(figsize=(7, 4.2), layout="constrained")
    ax = figure.subplots()
    edges = np.linspace(0.0, 1.0, bins + 1)
    for index, (name, values) in enumerate(similarities.items()):
        colour = f"C{index}"
        finite = values[np.isfinite(values)]
        mean = float(finite.mean()) if finite.size else float("nan")
        ax.hist(finite, bins=edges, histtype="step", linewidth=1.8, color=colour, label=f"{name}: mean {mean:.3f} (n = {finite.size})")
        ax.axvline(mean, color=colour, linestyle="--", linewidth=1.2)
    ax.set_xlim(0, 1)
    ax.set_xlabel("cosine similarity of an image's Grad-CAM maps")
    ax.set_ylabel("images")
    ax.legend(fontsize="small", loc="upper left")
    ax.set_title(f"Grad-CAM maps compared with those of\n{reference}", fontsize="medium")
    return figure
