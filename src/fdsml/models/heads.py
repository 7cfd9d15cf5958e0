"""Heads put on a timm trunk's pooled features (docs/method.md §4.1).

The embedding heads are the "projection" a backbone recipe names: a single linear layer
(ResNets: the classifier becomes a linear embedding) or the MoCo v3-style two-layer MLP
(ViTs). The classifier head serves the FDSL cross-entropy baseline on the same trunk.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn


def linear_embedding(in_features: int, out_features: int, hidden_features: int | None = None) -> nn.Module:
    """One linear layer from pooled features to the embedding (``hidden_features`` must be unset)."""
    if hidden_features is not None:
        raise ValueError("a linear embedding has no hidden layer: leave hidden_dim unset")
    return nn.Linear(in_features, out_features)


def mlp_projection(in_features: int, out_features: int, hidden_features: int | None = None) -> nn.Module:
    """Linear -> BatchNorm -> ReLU -> Linear.

    The first linear layer has no bias: the BatchNorm right after it would cancel it.
    """
    if hidden_features is None:
        raise ValueError("an MLP projection needs hidden_dim")
    return nn.Sequential(
        nn.Linear(in_features, hidden_features, bias=False),
        nn.BatchNorm1d(hidden_features),
        nn.ReLU(inplace=True),
        nn.Linear(hidden_features, out_features),
    )


PROJECTIONS: dict[str, Callable[..., nn.Module]] = {
    "linear": linear_embedding,
    "mlp": mlp_projection,
}
"""Embedding heads by name; a backbone recipe names one of them."""


def classifier(in_features: int, num_classes: int) -> nn.Module:
    """Logits over ``num_classes`` classes (the FDSL baseline's head)."""
    return nn.Linear(in_features, num_classes)
