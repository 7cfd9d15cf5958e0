"""Each analysis picture assembled from the models and ``AnalysisConfig``: the steps the pipeline nodes call."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fdsml.analysis.attention import AttentionPanel, attention_figure, vit_cls_maps
from fdsml.analysis.config import AnalysisConfig
from fdsml.analysis.embedding_maps import EmbeddingMap, class_sweep, embedding_map_figure
from fdsml.analysis.gradcam import (
    grad_cam,
    gradcam_figure,
    map_cosine_similarity,
    prototype_targets,
    resize_maps,
    similarity_figure,
)
from fdsml.analysis.inputs import RealImages, real_images
from fdsml.analysis.models import embed, is_resnet, is_vit, untrained_copy
from fdsml.analysis.projection import project_2d
from fdsml.analysis.trajectory import (
    interpolated_path,
    normalised_smoothness,
    pick_code_pair,
    render_path,
    trajectory_figure,
)
from fdsml.config import ConfigError
from fdsml.data import fractal_input
from fdsml.families import FamilySpec
from fdsml.models import EmbeddingModel, load_checkpoint_file, model_from_payload
from fdsml.models.starting_points import PRETRAINED, start_record
from fdsml.descriptor_validation.sweeps import sweep_factors

logger = logging.getLogger(__name__)


def load_models(config: AnalysisConfig, pretrained_model: dict[str, Any], device) -> dict[str, EmbeddingModel]:
    """Every configured checkpoint by name (``path: null`` = the catalog's pre-trained model), in eval mode."""
    models = {}
    for entry in config.checkpoints:
        payload = pretrained_model if entry.path is None else load_checkpoint_file(entry.path)
        models[entry.name] = model_from_payload(payload, device)
        logger.info("analysis: checkpoint %s = %s", entry.name, models[entry.name].config)
    return models


def message_figure(text: str) -> Figure:
    """A small picture that says why a picture is empty (the report keeps its place)."""
    figure = Figure(figsize=(6, 1.2))
    figure.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return figure


def _embed_fractals(model: EmbeddingModel, images: np.ndarray, batch_size: int) -> np.ndarray:
    """Renderings converted batch by batch (5,000 float images at 224 px would take gigabytes at once)."""
    spec = model.spec
    parts = [
        embed(model, fractal_input(images[start : start + batch_size], spec.img_size, spec.in_chans), batch_size)
        for start in range(0, len(images), batch_size)
    ]
    return np.concatenate(parts)


def embedding_maps(
    models: dict[str, EmbeddingModel],
    table: pd.DataFrame,
    spec: FamilySpec,
    factor_range: tuple[float, float],
    config: AnalysisConfig,
) -> Figure:
    """UMAP per checkpoint of random classes' instances, with one class's perturbation path drawn as pictures.

    The path is the descriptor validation's sweep grid over the perturbation range (evenly spaced,
    the class code itself at s = 1.0 exactly).
    """
    settings = config.embedding_map
    try:
        sweep_grid = sweep_factors(factor_range, settings.sweep_points)
    except ValueError as error:
        raise ConfigError(f"analysis.embedding_map.sweep_points: {error} (the family's perturbation range)") from error
    rng = config.rng(0)
    classes = np.sort(table["class_id"].unique())
    chosen = np.sort(rng.choice(classes, size=min(settings.n_classes, classes.size), replace=False))
    rows = table[table["class_id"].isin(chosen)].sort_values(["class_id", "instance_id"])
    rows = rows.groupby("class_id", sort=True).head(settings.max_instances_per_class)
    sweep_class = int(rng.choice(chosen))
    sweep_rows = rows[rows["class_id"] == sweep_class]
    instances, factors, parameter = class_sweep(spec, sweep_rows, sweep_grid)
    sweep_images = render_path(spec, instances, int(sweep_rows["seed"].iloc[0]))
    images = np.concatenate([spec.render_rows(rows), sweep_images])
    labels = rows["class_id"].to_numpy()
    maps = {}
    for name, model in models.items():
        points = project_2d(
            _embed_fractals(model, images, config.batch_size), "umap", seed=config.seed, n_neighbors=settings.n_neighbors
        )
        maps[name] = EmbeddingMap(points[: len(rows)], labels, points[len(rows) :])
    shown = np.unique(np.linspace(0, len(factors) - 1, min(settings.thumbnails, len(factors))).round().astype(int))
    logger.info("analysis: UMAP of %d instances of %d classes for %d checkpoint(s)", len(rows), chosen.size, len(models))
    return embedding_map_figure(
        maps,
        sweep_images[shown],
        shown,
        factors,
        sweep_class=sweep_class,
        sweep_parameter=spec.family.sweep_parameters(spec.settings)[parameter],
    )


def trajectories(
    models: dict[str, EmbeddingModel], table: pd.DataFrame, spec: FamilySpec, config: AnalysisConfig
) -> tuple[Figure, dict]:
    """Interpolation trajectory per checkpoint: its picture and its smoothness in the full embedding space."""
    settings = config.trajectory
    row_0, row_1 = pick_code_pair(table, spec.family.interpolation_groups(table), config.rng(1))
    alphas = np.linspace(0.0, 1.0, settings.n_alphas)
    images = render_path(spec, interpolated_path(spec, row_0, row_1, alphas), int(row_0["seed"]))
    projections, smoothness = {}, {}
    for name, model in models.items():
        embeddings = _embed_fractals(model, images, config.batch_size)
        smoothness[name] = normalised_smoothness(embeddings)
        projections[name] = project_2d(embeddings, settings.projection, seed=config.seed)
        logger.info("analysis: trajectory of %s: largest / median step %.3f", name, smoothness[name])
    shown = np.unique(np.linspace(0, settings.n_alphas - 1, min(settings.thumbnails, settings.n_alphas)).round().astype(int))
    pair = {
        key: {"class_id": int(row["class_id"]), "instance_id": int(row["instance_id"])} for key, row in (("code_0", row_0), ("code_1", row_1))
    }
    caption = (
        f"Interpolating class {pair['code_0']['class_id']} (instance {pair['code_0']['instance_id']}) to class "
        f"{pair['code_1']['class_id']} (instance {pair['code_1']['instance_id']}), "
        f"{settings.n_alphas} alphas, one rendering seed"
    )
    figure = trajectory_figure(
        projections, alphas, smoothness, images[shown], alphas[shown], projection=settings.projection, caption=caption
    )
    metrics = {
        "n_alphas": settings.n_alphas,
        **pair,
        "largest_over_median_step": smoothness,
    }
    return figure, metrics


def _gradcam_maps(model: EmbeddingModel, images: RealImages, config: AnalysisConfig, size: int) -> np.ndarray:
    batch = images.batch(model.spec.img_size, model.spec.in_chans)
    targets = prototype_targets(embed(model, batch, config.batch_size), images.labels)
    maps = grad_cam(model, batch, targets, layer=config.gradcam.layer, batch_size=config.batch_size)
    return resize_maps(maps, size)


def _references(resnets: dict[str, EmbeddingModel], config: AnalysisConfig) -> tuple[dict[str, EmbeddingModel], dict[str, str]]:
    """Reference models by name, and which reference each compared model is measured against."""
    chosen = config.gradcam.reference
    if chosen is not None:
        return {chosen: resnets[chosen]}, {name: chosen for name in resnets if name != chosen}
    references, against = {}, {}
    for name, model in resnets.items():
        key = f"untrained {model.spec.name}"
        if key in references and references[key].config != model.config:
            key = f"untrained {model.spec.name} ({name})"
        references.setdefault(key, untrained_copy(model, config.seed))
        against[name] = key
    return references, against


def gradcam_pictures(models: dict[str, EmbeddingModel], config: AnalysisConfig) -> tuple[Figure, Figure, dict]:
    """Grad-CAM maps of the ResNet checkpoints on real images, and their similarity to the reference's maps."""
    resnets = {name: model for name, model in models.items() if is_resnet(model)}
    for name in models.keys() - resnets.keys():
        logger.info("analysis: Grad-CAM skips %s (not a ResNet)", name)
    if not resnets:
        note = "Grad-CAM: no ResNet checkpoint among " + ", ".join(models)
        return message_figure(note), message_figure(note), {"reference": None, "mean_cosine": {}}
    if config.gradcam.reference is not None and config.gradcam.reference not in resnets:
        raise ValueError(f"analysis.gradcam.reference: {config.gradcam.reference!r} is not a ResNet checkpoint")
    settings = config.real_images
    images = real_images(settings.dataset, settings.root, settings.split, settings.n_images, config.rng(2))
    size = max(model.spec.img_size for model in resnets.values())
    references, against = _references(resnets, config)
    maps = {name: _gradcam_maps(model, images, config, size) for name, model in {**resnets, **references}.items()}
    similarities = {f"{name} vs {reference}": map_cosine_similarity(maps[name], maps[reference]) for name, reference in against.items()}
    means = {key: (float(np.nanmean(v)) if np.isfinite(v).any() else None) for key, v in similarities.items()}
    for key, mean in means.items():
        logger.info("analysis: Grad-CAM cosine %s: mean %s", key, "n/a" if mean is None else f"{mean:.3f}")
    reference_label = config.gradcam.reference or "an untrained network of the same architecture"
    shown_maps = {name: maps[name] for name in [*resnets, *(r for r in references if r not in resnets)]}
    maps_figure = gradcam_figure(images.display(size), shown_maps, config.gradcam.n_show, dataset=images.dataset)
    if similarities:
        histogram = similarity_figure(similarities, reference_label, config.gradcam.bins)
    else:
        histogram = message_figure(f"Grad-CAM similarity: no checkpoint besides the reference {reference_label}")
    metrics = {
        "reference": config.gradcam.reference or "untrained",
        "layer": config.gradcam.layer or "last convolutional stage",
        "dataset": images.dataset,
        "n_images": len(images),
        "mean_cosine": means,
        "empty_maps": {key: int((~np.isfinite(v)).sum()) for key, v in similarities.items()},
    }
    return maps_figure, histogram, metrics


def attention_picture(models: dict[str, EmbeddingModel], config: AnalysisConfig) -> Figure:
    """CLS-to-patch attention of every block for each ViT checkpoint, on the first real images."""
    vits = {name: model for name, model in models.items() if is_vit(model)}
    for name in models.keys() - vits.keys():
        logger.info("analysis: attention maps skip %s (not a ViT)", name)
    if not vits:
        return message_figure("CLS-to-patch attention: no ViT checkpoint among " + ", ".join(models))
    settings = config.real_images
    images = real_images(settings.dataset, settings.root, settings.split, settings.n_images, config.rng(2))
    shown = images.records.subset(np.arange(min(config.attention.n_show, len(images))))
    shown = RealImages(shown, images.dataset)
    panels = [
        AttentionPanel(name, shown.display(model.spec.img_size), vit_cls_maps(model, shown.batch(model.spec.img_size, model.spec.in_chans)))
        for name, model in vits.items()
    ]
    return attention_figure(panels, config.attention.n_show, dataset=images.dataset)


def analysis_metrics(trajectory: dict, gradcam: dict, config: AnalysisConfig, pretrained: dict) -> dict:
    """The numbers behind the pictures, with the checkpoints they describe and the content digest of the catalog's
    ``pretrained_model`` trunk they were drawn beside (:func:`fdsml.models.starting_points.start_record`)."""
    metrics = {
        "checkpoints": {entry.name: entry.path or "pretrained_model (catalog)" for entry in config.checkpoints},
        "pretrained_model": start_record(PRETRAINED, pretrained),
        "trajectory": trajectory,
        "gradcam": gradcam,
    }
    return _json_safe(metrics)


def _json_safe(value):
    """Non-finite floats become None (strict JSON has no Infinity or NaN)."""
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
