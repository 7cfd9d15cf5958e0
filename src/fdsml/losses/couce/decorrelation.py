"""L_cov: the decorrelation of the embedding dimensions over the batch."""

from __future__ import annotations

import torch


def decorrelation_loss(m: torch.Tensor) -> torch.Tensor:
    """L_cov = (1/d) sum_{i != j} Cov(M_i, M_j)^2 over the embedding dimensions (unbiased batch covariance)."""
    if m.shape[0] < 2:
        return m.new_zeros(())
    centred = m - m.mean(dim=0)
    covariance = centred.t() @ centred / (m.shape[0] - 1)
    off_diagonal = covariance - torch.diag(torch.diagonal(covariance))
    return (off_diagonal**2).sum() / m.shape[1]
