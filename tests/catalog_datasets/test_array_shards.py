import numpy as np
import pytest
from kedro.io import DatasetError

from fdsml.catalog_datasets import ArrayShardsDataset


def test_round_trip_from_a_generator(tmp_path):
    dataset = ArrayShardsDataset(filepath=str(tmp_path / "shards"))
    shards = (np.full((n, 4, 4), n, np.uint8) for n in (3, 1))
    dataset.save({"shards": shards, "size": 4})
    loaded = dataset.load()
    assert loaded["count"] == 4 and loaded["size"] == 4
    assert [s.shape for s in loaded["shards"]] == [(3, 4, 4), (1, 4, 4)]
    assert loaded["shards"][1][0, 0, 0] == 1


def test_a_failed_save_keeps_the_previous_folder_and_leaves_no_temporary(tmp_path):
    dataset = ArrayShardsDataset(filepath=str(tmp_path / "shards"))
    dataset.save({"shards": [np.zeros((2, 3, 3), np.uint8)]})

    def broken():
        yield np.ones((1, 3, 3), np.uint8)
        raise RuntimeError("renderer crashed")

    with pytest.raises(DatasetError, match="renderer crashed"):
        dataset.save({"shards": broken()})
    assert [p.name for p in tmp_path.iterdir()] == ["shards"]
    assert dataset.load()["count"] == 2


def test_a_reload_checks_the_folder_holds_what_was_saved(tmp_path):
    rank_zero, replica = (ArrayShardsDataset(filepath=str(tmp_path / "shards")) for _ in range(2))
    with pytest.raises(DatasetError, match="does not hold the renderings rank 0 just wrote.*storage every node sees"):
        replica.verify_reload({"shards": iter(()), "fingerprint": "abc"})  # nothing there (a node-local disk)
    rank_zero.save({"shards": [np.zeros((2, 3, 3), np.uint8)], "fingerprint": "abc", "render": {"size": 3}})
    replica.verify_reload({"shards": iter(()), "fingerprint": "abc", "render": {"size": 3}})
    with pytest.raises(DatasetError, match="does not hold"):
        replica.verify_reload({"shards": iter(()), "fingerprint": "another run", "render": {"size": 3}})
