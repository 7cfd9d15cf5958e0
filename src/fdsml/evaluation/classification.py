"""Classification metrics: top-k accuracy of a classifier's logits over a set of images, and its error per corrupted set.

Top-k counts an image as correct when its label is among the ``k`` largest logits
(``torch.topk``: ties between equal logits are broken by the sort, arbitrarily). ``k``
larger than the number of classes is clipped to it, so top-5 of a 3-class problem is 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from fdsml.data import ImageRecords
from fdsml.evaluation.embedding import model_outputs
from fdsml import distributed

if TYPE_CHECKING:
    from fdsml.data.image_records import ImageTransform


def topk_accuracy(logits: torch.Tensor, labels: torch.Tensor, ks: Sequence[int] = (1, 5)) -> dict[int, float]:
    """Fraction of rows whose label is among their ``k`` highest logits, for each ``k``."""
    if logits.ndim != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(f"need logits (N, C) and labels (N,), got {tuple(logits.shape)} and {tuple(labels.shape)}")
    if len(labels) == 0:
        raise ValueError("no images to score")
    largest = min(max(ks), logits.shape[1])
    top = logits.topk(largest, dim=1).indices
    hits = top == labels[:, None]
    return {k: hits[:, : min(k, largest)].any(dim=1).double().mean().item() for k in ks}


def classification_metrics(
    model: nn.Module, dataset: Dataset, *, batch_size: int = 256, device: str | torch.device = "cpu", workers: int = 0
) -> dict[str, float]:
    """``{"top1", "top5"}`` of ``model`` on ``dataset``, the same on every replica (rank 0 scores)."""
    return classification_scores(model, dataset, batch_size=batch_size, device=device, workers=workers)[0]


def classification_scores(
    model: nn.Module, dataset: Dataset, *, batch_size: int = 256, device: str | torch.device = "cpu", workers: int = 0
) -> tuple[dict[str, float], np.ndarray]:
    """:func:`classification_metrics` and each image's top-1 hit (bool, in order), the same on every replica."""
    outputs = model_outputs(model, dataset, batch_size=batch_size, device=device, workers=workers)

    def scores() -> tuple[dict[str, float], np.ndarray]:
        logits, labels = outputs
        accuracy = topk_accuracy(logits, labels, (1, 5))
        return {"top1": accuracy[1], "top5": accuracy[5]}, (logits.argmax(dim=1) == labels).numpy()

    return distributed.on_main_rank(scores, distributed.current())


def robustness_errors(
    model: nn.Module,
    sets: Mapping[tuple[str, int], ImageRecords],
    transform: ImageTransform,
    *,
    batch_size: int = 256,
    device: str | torch.device = "cpu",
    workers: int = 0,
) -> dict[tuple[str, int], float]:
    """Top-1 error (1 - accuracy) of ``model`` on each corrupted set, keyed like ``sets`` by (corruption, severity).

    The same on every replica; each set is scored by rank 0 as soon as it is embedded, so rank 0
    never holds more than one set's logits.
    """
    from fdsml.data import ImageRecordsDataset

    context, errors = distributed.current(), {}
    for key, records in sets.items():
        dataset = ImageRecordsDataset(records, transform)
        outputs = model_outputs(model, dataset, batch_size=batch_size, device=device, workers=workers)
        errors[key] = distributed.on_main_rank(lambda: 1.0 - topk_accuracy(*outputs, (1,))[1], context)
    return errors
