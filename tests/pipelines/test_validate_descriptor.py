"""The validate_descriptor pipeline end to end on a tiny configuration, through a real catalog."""

import json

import pytest

from fdsml.ifs.table_check import CodesTableError
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset
from kedro_datasets.text import TextDataset

from fdsml.config import ConfigError
from fdsml.data.holdout import HoldoutSettings, split_table
from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig
from fdsml.families.finefractaldb import generate_finefractaldb
from fdsml.ifs.render import RenderSettings
from fdsml.pipelines.validate_descriptor import create_pipeline
from fdsml.pipelines.validate_descriptor.nodes import measure_sweeps, measure_triplet_agreement

FRACTALS = {"seed": 2, "render": {"size": 32, "points": 600}}
TINY = {
    "seed": 0,
    "n_triplets": 30,
    "n_base_codes": 2,
    "grid_triplets_per_filter": 2,
    "sweep": {"factor_range": [0.6, 1.4], "n_factors": 5, "n_noise_seeds": 2},
}
SWEEP_KEYS = (
    "n_sweeps",
    "n_contractive",
    "monotone_fraction_contractive",
    "monotone_within_noise_fraction_contractive",
    "median_spearman_contractive",
    "monotone_fraction_noncontractive",
    "n_empty",
    "noise_floor_px_median",
)


@pytest.fixture(scope="module")
def table():
    config = FineFractalDBConfig(
        seed=2,
        n_classes=4,
        instances_per_class=5,
        class_filter=ClassFilter(enabled=False),
        render=RenderSettings(size=32, points=600),
    )
    return generate_finefractaldb(config)[0]


def _catalog(folder, table, params):
    return DataCatalog(
        {
            "fractal_codes": MemoryDataset(table),
            "params:fractals": MemoryDataset(FRACTALS),
            "params:validate_descriptor": MemoryDataset(params),
            "descriptor_validation": JSONDataset(filepath=str(folder / "validation.json")),
            "descriptor_validation_table": TextDataset(filepath=str(folder / "validation.md")),
            "descriptor_sweep_plot": MatplotlibDataset(filepath=str(folder / "sweep.png")),
            "descriptor_scatter_plot": MatplotlibDataset(filepath=str(folder / "scatter.png")),
            "descriptor_triplet_grid": MatplotlibDataset(filepath=str(folder / "grid.png")),
        }
    )


def _in_unit_interval(value):
    return value is None or 0.0 <= value <= 1.0


def test_pipeline_writes_report_table_and_pictures(tmp_path, table):
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, table, TINY))
    text = (tmp_path / "validation.json").read_text()
    summary = json.loads(text)
    assert "NaN" not in text
    assert summary["n_triplets"] == 30
    for key in ("agreement", "agreement_ci95"):
        assert set(summary[key]) == {"all", "each", "same", "diff"}
    for name, value in summary["agreement"].items():
        low, high = summary["agreement_ci95"][name]
        assert 0.0 <= low <= value <= high <= 1.0
    assert set(summary["label_rule_agreement"]) == {"each"} and _in_unit_interval(summary["label_rule_agreement"]["each"])
    assert set(summary["same_positive_rate"]) == {"each"} and _in_unit_interval(summary["same_positive_rate"]["each"])
    for block in ("sweeps", "sweeps_fresh_seeds"):
        sweeps = summary[block]
        assert all(key in sweeps for key in SWEEP_KEYS)
        assert sweeps["n_sweeps"] == 12 and 0 <= sweeps["n_contractive"] <= 12 and 0 <= sweeps["n_empty"] <= 12
        assert all(_in_unit_interval(sweeps[k]) for k in SWEEP_KEYS if "fraction" in k)
        assert sweeps["noise_floor_px_median"] >= 0.0
    assert summary["sweeps"]["seeding"] == "common" and summary["sweeps_fresh_seeds"]["seeding"] == "fresh"
    markdown = (tmp_path / "validation.md").read_text()
    assert "| each | 30 |" in markdown and "common seed" in markdown
    for picture in ("sweep.png", "scatter.png", "grid.png"):
        assert (tmp_path / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_held_out_classes_only_draw_every_triplet_and_sweep_from_the_classes_pre_training_never_sees(table):
    fractals = {**FRACTALS, "holdout": {"class_fraction": 0.5, "instance_fraction": 0.0}}
    held = set(table["class_id"].iloc[split_table(table, HoldoutSettings(class_fraction=0.5), seed=2).heldout_classes])
    params = {**TINY, "rows": "heldout_classes"}
    triplets = measure_triplet_agreement(table, fractals, params)
    drawn = set(triplets[["anchor_class", "first_class", "second_class"]].to_numpy().ravel())
    assert len(held) == 2 and drawn == held  # every row of the table: all four classes
    assert set(measure_sweeps(table, fractals, params)["class_id"]) <= held
    assert set(measure_triplet_agreement(table, fractals, TINY)[["anchor_class", "first_class"]].to_numpy().ravel()) > held
    with pytest.raises(ConfigError, match="validate_descriptor.rows: heldout_classes needs held-out classes; set fractals.holdout.class_fraction"):
        measure_triplet_agreement(table, {**FRACTALS, "holdout": {"class_fraction": 0.0}}, params)


def test_a_wrong_parameter_is_named(table):
    with pytest.raises(ConfigError, match="validate_descriptor.sweep.n_factors"):
        measure_sweeps(table, FRACTALS, {**TINY, "sweep": {"n_factors": 32}})
    with pytest.raises(ConfigError, match="validate_descriptor: unknown key.*n_triplet"):
        measure_triplet_agreement(table, FRACTALS, {**TINY, "n_triplet": 5})
    with pytest.raises(ConfigError, match="fractals.render.size"):
        measure_triplet_agreement(table, {"seed": 0, "render": {"size": "large"}}, TINY)
    with pytest.raises(ConfigError, match="fractals.family: unknown formula family 'fractaldb'; known families: finefractaldb"):
        measure_triplet_agreement(table, {**FRACTALS, "family": "fractaldb"}, TINY)


def test_a_missing_column_is_named(table):
    with pytest.raises(CodesTableError, match="fractal_codes: missing column.*psi"):
        measure_triplet_agreement(table.drop(columns="psi"), FRACTALS, TINY)
