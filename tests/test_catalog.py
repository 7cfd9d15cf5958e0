import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from kedro_datasets.pandas import CSVDataset

from fdsml.catalog import RankAwareDataCatalog
from .support import NO_HOLDOUT, copy_tracked, tiny_fractals, tiny_pretrain


def test_only_rank_zero_writes_files(tmp_path, monkeypatch):
    frame = pd.DataFrame({"step": [1], "loss": [0.5]})
    for rank, path in ((1, tmp_path / "replica.csv"), (0, tmp_path / "main.csv")):
        monkeypatch.setenv("RANK", str(rank))
        catalog = RankAwareDataCatalog({"history": CSVDataset(filepath=str(path))})
        catalog.save("history", frame)
        assert catalog.load("history").equals(frame)
    assert not (tmp_path / "replica.csv").exists() and (tmp_path / "main.csv").exists()


TINY_SHARDED_RUN = {
    "fractals": tiny_fractals(holdout=NO_HOLDOUT, outputs={"materialize": True, "shard_size": 8}),
    "pretrain": tiny_pretrain(2, {"data.source": "shards"}),
}


@pytest.mark.slow  # two gloo processes pre-training: about 20 seconds (`make test` stays under 15 minutes; CI runs it)
def test_two_ranks_pretrain_on_the_shards_rank_zero_materialised(tmp_path):
    """Under torchrun every rank runs the fractals pipeline; rank 0 writes the shards, the others load them."""
    copy_tracked(tmp_path, "conf", "src", "pyproject.toml")
    (tmp_path / "conf/local/parameters.yml").write_text(yaml.safe_dump(TINY_SHARDED_RUN))
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        ["torchrun", "--nproc_per_node=2", "--standalone", "-m", "kedro", "run", "--pipelines=pretrain"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    manifest = json.loads((tmp_path / "data/03_primary/fractal_images/manifest.json").read_text())
    assert manifest["count"] == 18 and len(manifest["shards"]) == 3
    assert len(list((tmp_path / "data/06_models/pretrain_run").glob("*/last.pt"))) == 1 and (tmp_path / "data/06_models/pretrained_model.pt").exists()
