"""The parameter descriptor Psi of an IFS code (METHOD.md section 2)."""

from __future__ import annotations

import numpy as np


def psi(coefficients: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """Psi = sum_k pi_k * psi_k: the probability-weighted mean of the maps' six coefficients."""
    coefficients = np.asarray(coefficients, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    return probabilities @ coefficients


def descriptor_distance(psi_a: np.ndarray, psi_b: np.ndarray) -> np.ndarray:
    """d_Psi: Euclidean distance between descriptors, broadcast over leading axes."""
    return np.linalg.norm(np.asarray(psi_a) - np.asarray(psi_b), axis=-1)
