"""A family registered by a test goes through generation, PA-Triplet pre-training, validation and the grids.

The family lives in ``tests/families/discs.py``: if any step held FineFractalDB-specific code,
this family (no coefficients, no render settings, its own columns) would break it.
"""

import json

import numpy as np
import pandas as pd
import torch
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner
from matplotlib.figure import Figure

from fdsml.models import load_checkpoint, model_payload
from fdsml.pipelines.analysis.nodes import plot_embedding_maps, plot_sample_grid, plot_triplet_grid, trace_trajectories
from fdsml.pipelines.pretrain import create_pipeline
from fdsml.pipelines.validate_descriptor import nodes as validation
from tests.support import FAMILY_PRETRAIN, FAMILY_VALIDATION

from ..pipelines.catalogs import pretrain_datasets

FRACTALS = {"family": "discs", "discs": {"seed": 4, "n_classes": 3, "instances_per_class": 6, "size": 16}, "outputs": {"materialize": True}}
ANALYSIS = {
    "device": "cpu",
    "embedding_map": {"n_classes": 3, "max_instances_per_class": 4, "sweep_points": 10, "thumbnails": 3},  # 1.0 on [0.8, 1.25]
    "trajectory": {"n_alphas": 5, "thumbnails": 3},
}


def test_a_new_family_is_generated_pretrained_validated_and_pictured(discs, tmp_path):
    SequentialRunner().run(create_pipeline(), DataCatalog(pretrain_datasets(tmp_path, FRACTALS, FAMILY_PRETRAIN)))

    table = pd.read_parquet(tmp_path / "codes.parquet")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(table.columns) == list(discs.table_columns(None)) and len(table) == 18
    assert summary["family"] == "discs" and summary["n_instances"] == 18
    assert (table["radius"] <= 0.5).all() and (table["occupancy"] >= 0.02).all()
    assert np.stack(table["psi"]).shape == (18, 2)
    manifest = json.loads((tmp_path / "images/manifest.json").read_text())
    assert manifest["family"] == "discs" and manifest["size"] == 16 and manifest["count"] == 18

    history = pd.read_csv(tmp_path / "history.csv")
    assert history["step"].tolist() == [1, 2, 3] and history["loss"].notna().all()
    model, payload = load_checkpoint(tmp_path / "model.pt")
    assert payload["metadata"]["filter"] == "each"
    assert model(torch.rand(2, 3, 16, 16)).shape == (2, 8)

    triplets = validation.measure_triplet_agreement(table, FRACTALS, FAMILY_VALIDATION)
    sweeps = validation.measure_sweeps(table, FRACTALS, FAMILY_VALIDATION)
    common = sweeps[sweeps["seeding"] == "common"]
    assert set(sweeps["position"]) == {0, 1} and (common.loc[common["factor"] == 1.0, "chamfer"] == 0).all()
    result, markdown = validation.summarise(triplets, sweeps, FRACTALS, FAMILY_VALIDATION)
    assert set(result["agreement"]) == {"all", "each", "same", "diff"} and "same_by_position" not in result
    assert result["settings"]["family"] == "discs" and "agreement" in markdown.lower()
    figures = [
        validation.plot_sweeps(sweeps, FRACTALS, FAMILY_VALIDATION),
        validation.plot_scatter(sweeps, FRACTALS, FAMILY_VALIDATION),
        validation.plot_triplet_grid(triplets, table, FRACTALS, FAMILY_VALIDATION),
        plot_sample_grid(table, FRACTALS, {}),
        plot_triplet_grid(table, FRACTALS, {}),
        plot_embedding_maps(table, model_payload(model), FRACTALS, ANALYSIS),
        trace_trajectories(table, model_payload(model), FRACTALS, ANALYSIS)[0],
    ]
    assert all(isinstance(figure, Figure) for figure in figures)
