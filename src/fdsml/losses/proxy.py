"""The proxy-based metric-learning losses by name (pytorch-metric-learning's), each computed in float32.

A loss is added with one :func:`register_proxy_loss` call: a class taking ``num_classes`` and
``embedding_size`` plus its own options and owning its proxies (:class:`~fdsml.losses.registry.LossRegistry`).
"""

from __future__ import annotations

from pytorch_metric_learning.losses import ProxyAnchorLoss, ProxyNCALoss, SoftTripleLoss
from torch import nn

from fdsml.losses.registry import LossRegistry

PROXY_LOSSES = LossRegistry("proxy loss")


def register_proxy_loss(name: str, loss_class: type[nn.Module]) -> None:
    """Make ``loss_class`` available as ``name`` (in float32)."""
    PROXY_LOSSES.register(name, loss_class)


register_proxy_loss("proxy_anchor", ProxyAnchorLoss)
register_proxy_loss("proxy_nca", ProxyNCALoss)
register_proxy_loss("soft_triple", SoftTripleLoss)


def build_proxy_loss(name: str, num_classes: int, embedding_dim: int, **options) -> nn.Module:
    """The proxy loss registered as ``name`` (it owns its proxies)."""
    return PROXY_LOSSES.build(name, num_classes=num_classes, embedding_size=embedding_dim, **options)
