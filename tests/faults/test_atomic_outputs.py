"""Every output is replaced whole: a failed write keeps the old file, a folder swap has no gap, no process-wide umask change."""

import json
import os
import socket
import threading

import pandas as pd
import pytest
from kedro_datasets.json import JSONDataset
from kedro_datasets.pandas import CSVDataset

from fdsml.atomic import atomic_path
from fdsml.catalog import RankAwareDataCatalog


class Unserialisable:
    pass


def test_a_save_that_fails_midway_keeps_the_previous_file(tmp_path):
    path = tmp_path / "metrics.json"
    catalog = RankAwareDataCatalog({"metrics": JSONDataset(filepath=str(path))})
    catalog.save("metrics", {"recall@1": 0.5})
    with pytest.raises(Exception):
        catalog.save("metrics", {"recall@1": 0.7, "broken": Unserialisable()})  # json.dump fails after writing a prefix
    assert json.loads(path.read_text()) == {"recall@1": 0.5}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_a_saved_file_keeps_the_usual_permissions(tmp_path):
    catalog = RankAwareDataCatalog({"history": CSVDataset(filepath=str(tmp_path / "h.csv"))})
    catalog.save("history", pd.DataFrame({"step": [1]}))
    assert (tmp_path / "h.csv").stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_the_umask_is_never_changed(tmp_path, monkeypatch):
    def refuse(mask):
        raise AssertionError("os.umask changes process-wide state")

    monkeypatch.setattr(os, "umask", refuse)
    with atomic_path(tmp_path / "a.txt") as temporary:
        temporary.write_text("x")
    assert (tmp_path / "a.txt").read_text() == "x"


def test_a_folder_swap_has_no_moment_without_a_folder(tmp_path):
    target = tmp_path / "shards"
    with atomic_path(target, directory=True) as folder:
        (folder / "manifest.json").write_text("0")
    gaps, done = [], threading.Event()

    def watch():
        while not done.is_set():
            if not (target / "manifest.json").exists():
                gaps.append(1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    for version in range(1, 200):
        with atomic_path(target, directory=True) as folder:
            (folder / "manifest.json").write_text(str(version))
    done.set()
    watcher.join()
    assert not gaps and (target / "manifest.json").read_text() == "199"
    assert [p.name for p in tmp_path.iterdir()] == ["shards"]


def test_temporaries_of_a_dead_writer_of_this_host_are_removed_another_hosts_are_left(tmp_path):
    dead = 2**22 + 12345  # above the default pid_max: no such process here
    stale = tmp_path / f".table.parquet.tmp-{dead}@{socket.gethostname()}~abc.parquet"
    elsewhere = tmp_path / f".table.parquet.tmp-{dead}@{socket.gethostname()}-2~abc.parquet"  # a live writer on a machine sharing the folder
    for temporary in (stale, elsewhere):
        temporary.write_bytes(b"half")
    with atomic_path(tmp_path / "table.parquet") as temporary:
        assert temporary.name.startswith(f".table.parquet.tmp-{os.getpid()}@{socket.gethostname()}~")
        temporary.write_bytes(b"whole")
    assert not stale.exists() and (tmp_path / "table.parquet").read_bytes() == b"whole"
    assert elsewhere.read_bytes() == b"half"


def _umask():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
