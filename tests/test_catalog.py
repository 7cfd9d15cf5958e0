import pandas as pd
from kedro_datasets.pandas import CSVDataset

from fdsml.catalog import RankAwareDataCatalog


def test_only_rank_zero_writes_files(tmp_path, monkeypatch):
    frame = pd.DataFrame({"step": [1], "loss": [0.5]})
    for rank, path in ((1, tmp_path / "replica.csv"), (0, tmp_path / "main.csv")):
        monkeypatch.setenv("RANK", str(rank))
        catalog = RankAwareDataCatalog({"history": CSVDataset(filepath=str(path))})
        catalog.save("history", frame)
        assert catalog.load("history").equals(frame)
    assert not (tmp_path / "replica.csv").exists() and (tmp_path / "main.csv").exists()
