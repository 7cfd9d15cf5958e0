"""Pair- and tuple-based metric-learning losses by name (pytorch-metric-learning's), each computed in float32.

They read class labels only (no descriptor): pre-training with one of them on the fractal classes
is the control that shows what metric learning itself gives, beside what PA-Triplet's descriptor
order adds. A loss is added with one ``PAIR_LOSSES.register`` call: a class taking its own
options and called as ``loss(embeddings, labels)``; it needs positive pairs, so it trains on P x K
class-balanced batches.
"""

from __future__ import annotations

from pytorch_metric_learning.losses import CircleLoss, ContrastiveLoss, MultiSimilarityLoss, NTXentLoss, SupConLoss
from torch import nn

from fdsml.losses.registry import LossRegistry

PAIR_LOSSES = LossRegistry("pair loss")
for name, loss_class in {
    "multi_similarity": MultiSimilarityLoss,
    "contrastive": ContrastiveLoss,
    "circle": CircleLoss,
    "ntxent": NTXentLoss,
    "supcon": SupConLoss,
}.items():
    PAIR_LOSSES.register(name, loss_class)


def build_pair_loss(name: str, **options) -> nn.Module:
    """The pair loss registered as ``name`` with its ``options`` (the library's keyword arguments)."""
    return PAIR_LOSSES.build(name, **options)
