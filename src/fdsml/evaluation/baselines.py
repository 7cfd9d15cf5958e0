"""The trivial answers a fine-tuned model is read against, scored on the same split and test view as it.

* **Raw pixels**: each image's test view (shrunk by area to at most ``baselines.pixel_size`` a side), flattened.
  Retrieval searches them as it searches embeddings (k-NN on L2-normalised vectors: cosine).
* **A frozen trunk**: the trunk a fine-tuning starts from, before any step, its pooled features
  (:func:`fdsml.evaluation.frozen_probe.trunk_features`).
* **Classification** has no nearest neighbour of its own: a nearest-centroid classifier on either
  of them, fitted on the training split's test views (each class's mean of L2-normalised vectors,
  an image given the class of the most similar centroid by cosine).

A fine-tuning that ends no better than these learned nothing its budget could show.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fdsml.data import ImageRecords, ImageRecordsDataset, ImageTransform
from fdsml.evaluation.classification import topk_accuracy
from fdsml.evaluation.embedding import model_outputs


class _Pixels(nn.Module):
    """Images as their pixels: shrunk by area to at most ``side`` pixels a side, then flattened."""

    def __init__(self, side: int):
        super().__init__()
        self.side = side

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[-1] > self.side or images.shape[-2] > self.side:
            images = F.adaptive_avg_pool2d(images, (min(images.shape[-2], self.side), min(images.shape[-1], self.side)))
        return images.flatten(1)


def pixel_vectors(
    records: ImageRecords, view: ImageTransform, side: int, *, batch_size: int = 256, device="cpu", workers: int = 0
) -> np.ndarray | None:
    """Each image's ``view`` (its test view), shrunk by area to at most ``side`` pixels a side (a 224-px view holds
    150,528 numbers an image), flattened, in order; None off rank 0 under DDP (as :func:`model_outputs`)."""
    dataset = ImageRecordsDataset(records, view)
    outputs = model_outputs(_Pixels(side), dataset, batch_size=batch_size, device=device, workers=workers)
    return None if outputs is None else outputs[0].numpy()


def _unit_rows(vectors: np.ndarray) -> torch.Tensor:
    rows = torch.as_tensor(vectors, dtype=torch.float64)
    return rows / rows.norm(dim=1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)


def class_sums(
    vectors_of: Callable[[ImageRecords], np.ndarray | None], records: ImageRecords, num_classes: int, *, chunk: int = 4096
) -> torch.Tensor | None:
    """Each class's sum of L2-normalised vectors (``num_classes`` x D, float64), the records read ``chunk`` at a time, so
    a large training split never sits in memory whole; ``vectors_of`` as :func:`pixel_vectors` (None off rank 0)."""
    sums = None
    for first in range(0, len(records), chunk):
        part = records.subset(np.arange(first, min(first + chunk, len(records))))
        vectors = vectors_of(part)
        if vectors is None:
            continue
        rows = _unit_rows(vectors)
        if sums is None:
            sums = torch.zeros(num_classes, rows.shape[1], dtype=torch.float64)
        sums.index_add_(0, torch.as_tensor(part.labels, dtype=torch.long), rows)
    return sums


def nearest_centroid_scores(sums: torch.Tensor, test: np.ndarray, test_labels: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
    """``{"top1", "top5"}`` of the nearest-centroid classifier (cosine) whose class sums are ``sums`` (:func:`class_sums`),
    and each test image's top-1 hit. A class without a training vector has no centroid and is never predicted."""
    norms = sums.norm(dim=1, keepdim=True)
    similarity = _unit_rows(test) @ (sums / norms.clamp_min(torch.finfo(torch.float64).tiny)).T
    similarity[:, norms[:, 0] == 0] = -torch.inf
    truth = torch.as_tensor(np.asarray(test_labels), dtype=torch.long)
    accuracy = topk_accuracy(similarity, truth, (1, 5))
    return {"top1": accuracy[1], "top5": accuracy[5]}, (similarity.argmax(dim=1) == truth).numpy()
