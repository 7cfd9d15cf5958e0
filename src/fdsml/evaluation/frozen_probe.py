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
from fdsml.evaluation.embedding import model_outputs, retrieval_split_metrics
from fdsml.models.network import EmbeddingModel


class _Trunk(nn.Module):
    """The model's pooled trunk features as its output, so the embedding loop serves both."""

    def __init__(self, model: EmbeddingModel):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.features(x)


def trunk_features(
    model: EmbeddingModel, records: ImageRecords, transform: ImageTransform, *, batch_size: int = 256, device="cpu", workers: int = 0
) -> np.ndarray | None:
    """Pooled trunk features of ``records`` (N x ``model.num_features``), in order; None off rank 0 under DDP."""
    outputs = model_outputs(
        _Trunk(model), ImageRecordsDataset(records, transform), batch_size=batch_size, device=device, workers=workers
    )
    return None if outputs is None else outputs[0].numpy()


def frozen_probe(
    model: EmbeddingModel,
    splits: RetrievalSplits,
    image_size: int,
    *,
    crop_fraction: float = 0.875,
    batch_size: int = 256,
    device="cpu",
    workers: int = 0,
    seed: int = 0,
    threads: int | None = None,
) -> dict[str, float]:
    """Retrieval metrics of the frozen trunk on the test classes (or queries against the gallery).

    Under DDP the replicas share the embedding and rank 0 the metrics (``threads``: faiss's).
    """
    view = ImageTransform(image_size, train=False, crop_fraction=crop_fraction)
    was_training = model.training
    try:
        return retrieval_split_metrics(
            lambda records: trunk_features(model, records, view, batch_size=batch_size, device=device, workers=workers),
            splits,
            seed=seed,
            threads=threads,
        )
    finally:
        model.train(was_training)
