"""A write into a full filesystem fails with a clear error and leaves the previous output intact."""

import json
import os
import subprocess

import numpy as np
import pytest
from kedro.io import DatasetError
from kedro_datasets.json import JSONDataset

from fdsml.atomic import DiskFullError
from fdsml.catalog import RankAwareDataCatalog
from fdsml.catalog_datasets import ArrayShardsDataset


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (needs root); unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root: run the suite as root to test a full disk")
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): the full-disk case is not tested")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_file_that_does_not_fit_keeps_the_previous_one(small_disk):
    path = small_disk / "retrieval_metrics.json"
    catalog = RankAwareDataCatalog({"metrics": JSONDataset(filepath=str(path))})
    catalog.save("metrics", {"recall@1": 0.5})
    with pytest.raises(DiskFullError, match="retrieval_metrics.json: no space left.*free space.*untouched"):
        catalog.save("metrics", {"recall@1": 0.7, "padding": "x" * 2_000_000})
    assert json.loads(path.read_text()) == {"recall@1": 0.5}
    assert [p.name for p in small_disk.iterdir()] == ["retrieval_metrics.json"]


def test_a_folder_that_does_not_fit_keeps_the_previous_one(small_disk):
    dataset = ArrayShardsDataset(filepath=str(small_disk / "images"))
    dataset.save({"shards": [np.zeros((4, 8, 8), np.uint8)]})
    with pytest.raises(DatasetError, match="images: no space left"):
        dataset.save({"shards": [np.ones((300, 64, 64), np.uint8)]})
    stored = dataset.load()
    assert stored["count"] == 4 and not stored["shards"][0].any()
    assert [p.name for p in small_disk.iterdir()] == ["images"]
