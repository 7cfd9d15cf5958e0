"""The fractals pipeline end to end on a tiny configuration, through a real catalog."""

import json
import os
import socket

import numpy as np
import pandas as pd
import pytest
import torch
import torch.multiprocessing as mp
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner
from kedro_datasets.pillow import ImageDataset

from fdsml.config import ConfigError
from fdsml.catalog_datasets import ArrayShardsDataset
from fdsml.ifs.finefractaldb import TABLE_COLUMNS, instance_code
from fdsml.ifs.render import RenderSettings
from fdsml.pipelines.fractals import create_pipeline, nodes

from .catalogs import fractals_datasets
from tests.support import tiny_fractals

TINY = tiny_fractals(seed=1, instances=4, outputs={"materialize": True, "shard_size": 5, "grid_classes": 2, "grid_instances": 3})


def _catalog(folder, params):
    return DataCatalog(fractals_datasets(folder, params))


def test_pipeline_writes_table_summary_grid_and_shards(tmp_path):
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, TINY))
    table = pd.read_parquet(tmp_path / "codes.parquet")
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert len(table) == 12 and sorted(table["class_id"].unique()) == [0, 1, 2]
    assert table["occupancy"].min() >= 0.0005
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_instances"] == 12 and summary["seconds"] >= 0
    images = ArrayShardsDataset(filepath=str(tmp_path / "images")).load()
    assert [len(s) for s in images["shards"]] == [5, 5, 2] and images["count"] == 12
    settings = RenderSettings(size=32, points=600)
    row = table.iloc[7]
    np.testing.assert_array_equal(images["shards"][1][2], settings.render(*instance_code(row), int(row["seed"])))
    grid = np.asarray(ImageDataset(filepath=str(tmp_path / "samples.png")).load())
    assert grid.shape == (2 * 34 + 2, 3 * 34 + 2) and grid.max() > 0


def test_running_twice_gives_an_identical_table(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        SequentialRunner().run(create_pipeline(), _catalog(folder, TINY | {"outputs": {"materialize": False}}))
    assert (first / "codes.parquet").read_bytes() == (second / "codes.parquet").read_bytes()
    manifest = json.loads((first / "images" / "manifest.json").read_text())
    assert manifest["shards"] == [] and manifest["materialized"] is False


def test_bad_parameters_stop_the_run_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="fractals.render.mode"):
        SequentialRunner().run(create_pipeline(), _catalog(tmp_path, TINY | {"render": {"mode": "splat"}}))
    assert list(tmp_path.iterdir()) == []


def test_an_up_to_date_table_is_reused_and_a_changed_one_regenerated(tmp_path):
    params = TINY | {"outputs": {"materialize": False}}
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, params))
    first = json.loads((tmp_path / "summary.json").read_text())
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, params))
    assert json.loads((tmp_path / "summary.json").read_text()) == first  # same time taken: not regenerated
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, params | {"seed": 2}))
    changed = json.loads((tmp_path / "summary.json").read_text())
    assert changed["fingerprint"] != first["fingerprint"]
    assert pd.read_parquet(tmp_path / "codes.parquet")["coefficients"].tolist() != []


def _generate_as_replica(rank: int, port: int, folder: str) -> None:
    """One of two torchrun-like replicas running the table's node; it notes whether it generated the table itself."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    generate = nodes.generate_table

    def noting(spec):
        open(f"{folder}/generated{rank}", "w").close()
        return generate(spec)

    nodes.generate_table = noting
    table, _ = nodes.generate_fractal_codes(TINY | {"outputs": {"materialize": False}}, None, None)
    table.to_parquet(f"{folder}/table{rank}.parquet")
    if torch.distributed.is_initialized():  # a replica generating alone never joins the group
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_under_torchrun_rank_0_generates_the_table_and_the_other_replicas_receive_it(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(_generate_as_replica, args=(port, str(tmp_path)), nprocs=2, join=True)
    assert sorted(path.name for path in tmp_path.glob("generated*")) == ["generated0"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "table1.parquet"), pd.read_parquet(tmp_path / "table0.parquet"))
