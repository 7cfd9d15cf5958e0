"""The frozen-feature probe: how well a trunk's pooled features retrieve real images with no fine-tuning.

It asks whether pre-training alone learned something that transfers, before any recipe on the
target data can mask or create a difference: the trunk's features (the head is left out, as
fine-tuning replaces it) of the retrieval dataset's test images, seen with the test view,
scored with the retrieval metrics (Recall@K, MAP@R, ...).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fdsml.data import ImageRecords, ImageRecordsDataset, ImageTransform, RetrievalSplits
from fdsml.evaluation.classification import model_outputs
from fdsml.evaluation.retrieval import retrieval_metrics
from fdsml.models.network import EmbeddingModel


class _Trunk(nn.Module):
    """The model's pooled trunk features as its output, so the embedding loop serves both."""

    def __init__(self, model: EmbeddingModel):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.features(x)


def trunk_features(
    model: EmbeddingModel, records: ImageRecords, transform: ImageTransform, *, batch_size: int = 256, device="cpu"
) -> np.ndarray:
    """Pooled trunk features of ``records`` (N x ``model.num_features``), in order."""
    features, _ = model_outputs(_Trunk(model), ImageRecordsDataset(records, transform), batch_size=batch_size, device=device)
    return features.numpy()


def frozen_probe(
    model: EmbeddingModel,
    splits: RetrievalSplits,
    image_size: int,
    *,
    crop_fraction: float = 0.875,
    batch_size: int = 256,
    device="cpu",
    seed: int = 0,
) -> dict[str, float]:
    """Retrieval metrics of the frozen trunk on the test classes (or queries against the gallery)."""
    view = ImageTransform(image_size, train=False, crop_fraction=crop_fraction)
    was_training = model.training
    try:
        if splits.has_query_set:
            return retrieval_metrics(
                trunk_features(model, splits.gallery, view, batch_size=batch_size, device=device),
                splits.gallery.labels,
                ks=splits.ks,
                query_embeddings=trunk_features(model, splits.query, view, batch_size=batch_size, device=device),
                query_labels=splits.query.labels,
                seed=seed,
            )
        features = trunk_features(model, splits.test, view, batch_size=batch_size, device=device)
        return retrieval_metrics(features, splits.test.labels, ks=splits.ks, seed=seed)
    finally:
        model.train(was_training)
