"""The proxy-based metric-learning losses by name (pytorch-metric-learning's), each computed in float32.

A loss is added with one :func:`register_proxy_loss` call: a class taking ``num_classes`` and
``embedding_size`` plus its own options and owning its proxies. The registry keeps a subclass
whose ``forward`` runs in float32 (:func:`fdsml.losses.precision.full_precision`), so proxies,
state dict and ``isinstance`` stay the library's.
"""

from __future__ import annotations

from pytorch_metric_learning.losses import ProxyAnchorLoss, ProxyNCALoss, SoftTripleLoss
from torch import nn

from fdsml.losses.precision import in_full_precision

PROXY_LOSSES: dict[str, type[nn.Module]] = {}


def register_proxy_loss(name: str, loss_class: type[nn.Module]) -> None:
    """Make ``loss_class`` available as ``name``, as a subclass whose forward runs in float32."""
    PROXY_LOSSES[name] = in_full_precision(loss_class, __name__)


register_proxy_loss("proxy_anchor", ProxyAnchorLoss)
register_proxy_loss("proxy_nca", ProxyNCALoss)
register_proxy_loss("soft_triple", SoftTripleLoss)


def build_proxy_loss(name: str, num_classes: int, embedding_dim: int, **options) -> nn.Module:
    """The proxy loss registered as ``name`` (it owns its proxies)."""
    if name not in PROXY_LOSSES:
        raise ValueError(f"unknown proxy loss {name!r}; choose one of {', '.join(PROXY_LOSSES)}")
    return PROXY_LOSSES[name](num_classes=num_classes, embedding_size=embedding_dim, **options)
