"""The class perturbation path behind the UMAP picture, the model input, and the 2-D projections."""

import numpy as np
import pytest
import torch
from torchvision.transforms.v2 import Resize

from fdsml.analysis.embedding_maps import class_sweep, reconstruct_class_code
from fdsml.analysis.inputs import fractal_tensor
from fdsml.analysis.pictures import sweep_factors
from fdsml.analysis.projection import l2_normalise, project_2d
from fdsml.data import FractalCodesDataset
from fdsml.ifs.finefractaldb import instance_code, render_rows

from .conftest import RENDER


def test_every_instance_of_a_class_leads_back_to_the_same_class_code(tiny_table):
    for _, rows in tiny_table.groupby("class_id"):
        codes = [reconstruct_class_code(row) for _, row in rows.iterrows()]
        for code in codes[1:]:
            np.testing.assert_allclose(code, codes[0], rtol=1e-12)


def test_the_sweep_passes_through_the_instance_at_its_own_factor(tiny_table):
    row = tiny_table.iloc[3]
    factors = np.array([0.8, float(row["factor"]), 1.2])
    codes, kept = class_sweep(row, factors)
    assert float(row["factor"]) in kept
    np.testing.assert_allclose(codes[list(kept).index(float(row["factor"]))], instance_code(row)[0], rtol=1e-12)


def test_pca_keeps_the_distances_of_unit_vectors_in_a_plane():
    angles = np.linspace(0, 2, 9)
    basis = np.linalg.qr(np.random.default_rng(0).normal(size=(12, 2)))[0].T
    points = 5.0 * (np.cos(angles)[:, None] * basis[0] + np.sin(angles)[:, None] * basis[1])
    flat = project_2d(points, "pca")
    unit = l2_normalise(points)
    distances = lambda x: np.linalg.norm(x[:, None] - x[None], axis=-1)  # noqa: E731
    np.testing.assert_allclose(distances(flat), distances(unit), atol=1e-10)
    with pytest.raises(ValueError, match="unknown projection"):
        project_2d(points, "tsne")


def test_the_sweep_always_contains_the_class_code_itself():
    factors = sweep_factors((0.6, 1.4), 4)
    assert factors[0] == 0.6 and factors[-1] == 1.4 and np.isclose(factors, 1.0).sum() == 1
    assert np.isclose(sweep_factors((0.6, 1.4), 17), 1.0).sum() == 1
    assert not np.isclose(sweep_factors((1.1, 1.4), 3), 1.0).any()


@pytest.mark.parametrize("img_size", [32, 16])
def test_fractals_enter_the_model_exactly_as_in_pre_training(tiny_table, img_size):
    transform = None if img_size == RENDER.size else Resize((img_size, img_size), antialias=True)
    dataset = FractalCodesDataset(tiny_table, RENDER, seed=0, transform=transform)
    expected = torch.stack([dataset[i]["image"] for i in range(3)])
    ours = fractal_tensor(render_rows(tiny_table.iloc[:3], RENDER), img_size)
    torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-5)
