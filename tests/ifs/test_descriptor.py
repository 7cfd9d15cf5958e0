"""d_Psi: one Euclidean distance for NumPy (validation) and torch (the in-batch triplet miner)."""

import numpy as np
import torch

from fdsml.ifs.descriptor import descriptor_distance
from fdsml.losses.pa_triplet import descriptor_distances


def test_numpy_and_torch_give_the_same_distances():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    expected = np.sqrt(((a - b) ** 2).sum(axis=1))
    np.testing.assert_allclose(descriptor_distance(a, b), expected, rtol=1e-15)
    on_torch = descriptor_distance(torch.from_numpy(a), torch.from_numpy(b))
    assert isinstance(on_torch, torch.Tensor)
    np.testing.assert_allclose(on_torch.numpy(), expected, rtol=1e-15)


def test_the_miner_s_pairwise_distances_are_d_psi_and_exactly_zero_for_equal_descriptors():
    psi = torch.randn(4, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float32)
    psi[3] = psi[1]
    pairwise = descriptor_distances(psi)
    assert pairwise.dtype == torch.float64
    double = psi.double().numpy()
    np.testing.assert_allclose(pairwise.numpy(), descriptor_distance(double[:, None], double[None]), rtol=1e-15)
    assert pairwise[1, 3] == 0.0 and pairwise[3, 1] == 0.0
