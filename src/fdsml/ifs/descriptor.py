"""The parameter descriptor Psi of an IFS code (docs/method.md §2.3)."""

from __future__ import annotations

import numpy as np


def psi(coefficients: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """Psi = sum_k pi_k * psi_k: the probability-weighted mean of the maps' six coefficients.

    Summed in map order: a BLAS product sums in an order its CPU-specific kernel chooses, which
    changed the descriptors' last bits (and the table's bytes) between machines.
    """
    coefficients = np.asarray(coefficients, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    total = probabilities[0] * coefficients[0]
    for k in range(1, len(probabilities)):
        total = total + probabilities[k] * coefficients[k]
    return total


def descriptor_distance(psi_a, psi_b):
    """d_Psi: Euclidean distance between descriptors, broadcast over leading axes.

    NumPy arrays give a NumPy result; two torch tensors give a tensor on their device (the
    in-batch triplet miner), so every user of d_Psi computes it the same way. Computed from
    coordinate differences, not a Gram-matrix shortcut, so equal descriptors are exactly 0 apart
    and PA-Triplet ties are decided by its rule, not by rounding.
    """
    if hasattr(psi_a, "norm"):  # torch tensors (this module does not import torch)
        return (psi_a - psi_b).norm(dim=-1)
    return np.linalg.norm(np.asarray(psi_a) - np.asarray(psi_b), axis=-1)
