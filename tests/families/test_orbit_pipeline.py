"""VisualAtom and RCDB end to end on a tiny configuration: generation, PA-Triplet pre-training on
fresh instances, descriptor validation."""

import json

import numpy as np
import pandas as pd
import pytest
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner

from fdsml.families import get_family
from fdsml.pipelines.pretrain import create_pipeline
from fdsml.pipelines.validate_descriptor import nodes as validation

from ..pipelines.catalogs import pretrain_datasets
from tests.support import FAMILY_PRETRAIN, FAMILY_VALIDATION

ANALYSIS = {
    "device": "cpu",
    "batch_size": 8,
    "embedding_map": {"n_classes": 3, "max_instances_per_class": 4, "sweep_points": 5, "thumbnails": 3},
    "trajectory": {"n_alphas": 5, "thumbnails": 3},
}
TINY = {"seed": 2, "n_classes": 3, "instances_per_class": 4, "size": 32, "vertices": [3, 40], "orbits": [1, 20]}


@pytest.mark.parametrize("name", ["visual_atom", "rcdb"])
def test_generated_pretrained_and_validated(name, tmp_path):
    family = get_family(name)
    settings = TINY | ({"vertices": [200, 240]} if name == "visual_atom" else {})
    fractals = {"family": name, name: settings, "outputs": {"materialize": True}}
    SequentialRunner().run(create_pipeline(), DataCatalog(pretrain_datasets(tmp_path, fractals, FAMILY_PRETRAIN)))

    table = pd.read_parquet(tmp_path / "codes.parquet")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(table.columns) == list(family.table_columns(None)) and len(table) == 12
    assert summary["family"] == name and (table["occupancy"] >= 0.0005).all()
    psi = np.stack(table["psi"])
    assert psi.shape == (12, len(family.ranges(family.settings_type()))) and psi.min() >= 0 and psi.max() <= 1
    # instances of a class share its integers and differ in at most one continuous parameter
    for _, rows in table.groupby("class_id"):
        assert rows["vertices"].nunique() == 1 and rows["orbits"].nunique() == 1
    history = pd.read_csv(tmp_path / "history.csv")
    assert history["loss"].notna().all() and len(history) == FAMILY_PRETRAIN["train"]["max_steps"]

    triplets = validation.measure_triplet_agreement(table, fractals, FAMILY_VALIDATION)
    sweeps = validation.measure_sweeps(table, fractals, FAMILY_VALIDATION)
    assert set(sweeps["position"]) == set(range(len(family.continuous)))
    result, _ = validation.summarise(triplets, sweeps, fractals, FAMILY_VALIDATION)
    assert result["settings"]["family"] == name


@pytest.mark.parametrize("name", ["visual_atom", "rcdb"])
def test_the_embedding_map_and_the_trajectory_are_drawn_through_the_family(name):
    """The analysis sweep and trajectory rescale and interpolate through the family's sweep hooks."""
    from matplotlib.figure import Figure

    from fdsml.analysis import pictures
    from fdsml.analysis.config import parse_analysis_params
    from fdsml.analysis.trajectory import interpolated_path, render_path
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table
    from fdsml.models import build_model

    spec = family_spec({"family": name, name: TINY | ({"vertices": [200, 240]} if name == "visual_atom" else {})})
    table, _ = generate_table(spec)
    config = parse_analysis_params(ANALYSIS)
    models = {"resnet": build_model("resnet18", img_size=32, embedding_dim=8).eval()}
    assert isinstance(pictures.embedding_maps(models, table, spec, spec.settings.factor_range, config), Figure)
    figure, metrics = pictures.trajectories(models, table, spec, config)
    # >= 1 by definition; inf when most steps of the tiny path render the same image (median step 0)
    assert isinstance(figure, Figure) and metrics["largest_over_median_step"]["resnet"] >= 1.0
    row_0, row_1 = table.iloc[0], table.iloc[-1]
    ends = render_path(spec, interpolated_path(spec, row_0, row_1, np.array([0.0, 1.0])), seed=3)
    assert np.array_equal(ends[0], spec.render(spec.instance(row_0), 3))
    assert np.array_equal(ends[1], spec.render(spec.instance(row_1), 3))
