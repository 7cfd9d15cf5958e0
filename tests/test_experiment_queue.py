"""Arms as DVC experiment queues: a tiny two-arm grid queued with fdsml.experiment_queue, run by `dvc queue start`, compared by `dvc exp show`."""

import csv
import io
import subprocess
import time
from pathlib import Path

import pytest

from fdsml.experiment_queue import Experiment, printed, queue, settings

from tests.dvc_chain import run_checked
from tests.fresh_clone import BIN
from tests.support import copy_tracked

FILES = {"fractals": "conf/base/parameters_fractals.yml", "validate_descriptor": "conf/base/parameters_validate_descriptor.yml"}
TINY = [
    ("fractals.n_classes", 4), ("fractals.instances_per_class", 5), ("fractals.render.size", 32), ("fractals.render.points", 600),
    ("fractals.class_filter.size", 96), ("fractals.class_filter.points", 4000), ("validate_descriptor.n_triplets", 20),
    ("validate_descriptor.n_base_codes", 2), ("validate_descriptor.sweep.n_factors", 5), ("validate_descriptor.sweep.n_noise_seeds", 2),
    ("validate_descriptor.sweep.compare_fresh_seeds", False), ("validate_descriptor.grid_triplets_per_filter", 1),
]
TINY_GRID = [
    Experiment("default", settings(FILES, TINY), "validate_descriptor"),
    Experiment("one-map", settings(FILES, [*TINY, ("fractals.perturbation.scope", "one_map")]), "validate_descriptor"),
]
QUEUE_TIMEOUT_S = 1800  # two tiny arms take 5 minutes alone, 16 on a shared 2-core machine


def _grid_table(repository: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(run_checked(["dvc", "exp", "show", "--csv"], repository))))


@pytest.fixture(scope="module")
def queued_grid(tmp_path_factory):
    """The generator's default and one-map variants at a tiny scale queued in a committed copy of the project, the queue run with one worker."""
    copy = copy_tracked(tmp_path_factory.mktemp("repo"))
    run_checked(["git", "init", "-q"], copy)
    run_checked(["git", "add", "-A"], copy)
    run_checked(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"], copy)
    queue(TINY_GRID, copy, dvc=str(BIN / "dvc"))
    queued = run_checked(["dvc", "queue", "status"], copy)
    run_checked(["dvc", "queue", "start", "-j", "1"], copy)
    try:
        deadline = time.monotonic() + QUEUE_TIMEOUT_S
        while any(state in (status := run_checked(["dvc", "queue", "status"], copy)) for state in ("Queued", "Running")):
            assert time.monotonic() < deadline, f"the queue did not finish in {QUEUE_TIMEOUT_S} s:\n{status}"
            time.sleep(5)
    finally:
        subprocess.run([str(BIN / "dvc"), "queue", "stop", "--kill"], cwd=copy, capture_output=True)
    return copy, queued, status


@pytest.mark.slow
def test_a_two_arm_grid_runs_from_the_queue_and_compares_in_exp_show(queued_grid):
    copy, queued, status = queued_grid
    assert "default" in queued and "one-map" in queued and queued.count("Queued") == 2
    assert status.count("Success") == 2, status
    rows = {row["Experiment"]: row for row in _grid_table(copy) if row["Experiment"] in ("default", "one-map")}
    assert set(rows) == {"default", "one-map"}
    assert rows["one-map"]["fractals.perturbation.scope"] == "one_map"
    assert rows["default"]["fractals.perturbation.scope"] == "every_map"
    for row in rows.values():
        assert row["State"] == "Success"
        assert row["n_classes"] == "4"  # the generated table's metric: the tiny scale travelled with the arm
        assert 0 <= float(row["agreement.all"]) <= 1  # the validation's metric, compared side by side


def test_an_arm_prints_as_the_command_it_queues():
    files = {"fractals": "conf/base/parameters_fractals.yml"}
    arm = Experiment("one-map", settings(files, [("fractals.perturbation.scope", "one_map"), ("fractals.n_classes", 4)]), "validate_descriptor")
    assert printed([arm], queue=True) == [
        "dvc exp run validate_descriptor --queue -n one-map "
        "-S 'conf/base/parameters_fractals.yml:fractals.perturbation.scope=\"one_map\"' "
        "-S conf/base/parameters_fractals.yml:fractals.n_classes=4"
    ]
