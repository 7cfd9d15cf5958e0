"""L_inv: invariance of the proxy-similarity distributions of the clean and the intervened view."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def proxy_matrix(loss: nn.Module) -> torch.Tensor:
    """(n_proxies, d): a pytorch-metric-learning loss's proxies (SoftTriple: all its centres)."""
    if hasattr(loss, "proxies"):
        return loss.proxies
    if hasattr(loss, "fc") and hasattr(loss, "centers_per_class"):
        return loss.fc.t()
    raise ValueError(f"{type(loss).__name__} has no proxies (expected .proxies or SoftTriple's .fc)")


def proxy_log_probabilities(m: torch.Tensor, proxies: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(m . P^T / tau) with ``m`` and ``P`` L2-normalised (cosine similarities)."""
    return F.log_softmax(F.normalize(m, dim=1) @ F.normalize(proxies, dim=1).t() / temperature, dim=1)


def kl_divergence(target_log: torch.Tensor, prediction_log: torch.Tensor) -> torch.Tensor:
    """Per-row KL(target || prediction) from log-probabilities."""
    return (target_log.exp() * (target_log - prediction_log)).sum(dim=1)


def invariance_loss(
    m: torch.Tensor, m_tilde: torch.Tensor, proxies: torch.Tensor, temperature: float = 0.1, stop_gradient: bool = True
) -> torch.Tensor:
    """L_inv = mean_i [KL(p_i || p~_i) + KL(p~_i || p_i)] over the proxy-similarity distributions.

    With ``stop_gradient`` each direction's target (the first argument) is detached, so each
    branch is trained only by the term in which it is the prediction.
    """
    log_p = proxy_log_probabilities(m, proxies, temperature)
    log_q = proxy_log_probabilities(m_tilde, proxies, temperature)
    target_p, target_q = (log_p.detach(), log_q.detach()) if stop_gradient else (log_p, log_q)
    return (kl_divergence(target_p, log_q) + kl_divergence(target_q, log_p)).mean()
