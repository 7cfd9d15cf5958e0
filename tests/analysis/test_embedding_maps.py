"""The class perturbation path behind the UMAP picture, the model input, and the 2-D projections."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fdsml.analysis import pictures
from fdsml.analysis.config import parse_analysis_params
from fdsml.analysis.embedding_maps import class_sweep
from fdsml.analysis.projection import l2_normalise, project_2d
from fdsml.config import ConfigError
from fdsml.ifs.finefractaldb import class_code, instance_code
from fdsml.training.pretrain import build_fractal_dataset, parse_pretrain_params

from tests.support import UNFILTERED_SPEC


def test_every_instance_of_a_class_leads_back_to_the_same_class_code(tiny_unfiltered_table):
    for _, rows in tiny_unfiltered_table.groupby("class_id"):
        codes = [class_code(row) for _, row in rows.iterrows()]
        for code in codes[1:]:
            np.testing.assert_allclose(code, codes[0], rtol=1e-12)


def test_the_sweep_passes_through_the_instance_at_its_own_factor(tiny_unfiltered_table):
    row = tiny_unfiltered_table.iloc[3]
    factors = np.array([0.8, float(row["factor"]), 1.2])
    instances, kept, parameter = class_sweep(UNFILTERED_SPEC, tiny_unfiltered_table.iloc[[3]], factors)
    assert float(row["factor"]) in kept and parameter == row["position"]
    np.testing.assert_allclose(instances[list(kept).index(float(row["factor"]))].coefficients, instance_code(row)[0], rtol=1e-12)


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


def test_a_sweep_grid_without_the_class_code_is_refused_naming_the_key(tiny_unfiltered_table):
    # 4 points on [0.6, 1.4] miss s = 1; the picture once slipped 1.0 in, an uneven grid of 5.
    config = parse_analysis_params({"embedding_map": {"sweep_points": 4}})
    with pytest.raises(ConfigError, match=r"analysis\.embedding_map\.sweep_points: .*do not include 1\.0"):
        pictures.embedding_maps({}, tiny_unfiltered_table, UNFILTERED_SPEC, (0.6, 1.4), config)


@pytest.mark.parametrize("img_size", [32, 16])
def test_fractals_enter_the_model_exactly_as_in_pre_training(tiny_unfiltered_table, img_size, monkeypatch, tmp_path):
    params = {"model": {"backbone": "resnet18", "img_size": img_size}, "data": {"fresh_noise": False}, "run_dir": str(tmp_path)}
    config = parse_pretrain_params(params)  # the table's own rendering seeds, as the analysis renders
    dataset = build_fractal_dataset(tiny_unfiltered_table.iloc[:3], UNFILTERED_SPEC, config, None)
    trained_on = dataset.model_input(torch.stack([dataset[i]["image"] for i in range(3)]))
    seen = []
    monkeypatch.setattr(pictures, "embed", lambda model, images, batch_size: seen.append(images) or np.zeros((len(images), 2)))
    model = SimpleNamespace(spec=SimpleNamespace(img_size=img_size, in_chans=3))
    pictures._embed_fractals(model, UNFILTERED_SPEC.render_rows(tiny_unfiltered_table.iloc[:3]), batch_size=2)
    assert torch.equal(torch.cat(seen), trained_on)
