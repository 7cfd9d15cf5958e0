"""A fixed set of arms as an Optuna study: each arm runs once, a FAIL or a changed fingerprint reruns, workers share it."""

import json
import os
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from optuna.trial import TrialState

from fdsml.tuning.arms import arm_results, open_arms_study, run_arms

ARMS = {"a": "f1", "b": "f1", "c": "f1"}


def square(log: str, arm: str) -> tuple[float, dict]:
    """A cheap real arm: its value is a function of its name; every call is appended to ``log``."""
    with open(log, "a") as handle:
        handle.write(f"{arm} {os.getpid()}\n")
    value = float(ord(arm[0]) ** 2)
    return value, {"square": value, "arm": arm}


def slow_square(log: str, arm: str) -> tuple[float, dict]:
    time.sleep(0.5)  # long enough for every worker to take arms
    return square(log, arm)


def runs(log: Path) -> list[str]:
    return log.read_text().split("\n")[:-1] if log.exists() else []


@pytest.mark.slow  # two kedro runs of a study file: about 12 seconds (`make test` stays under 15 minutes; CI runs it)
def test_arms_run_once_and_a_second_invocation_reruns_nothing(tmp_path):
    log = tmp_path / "log"
    assert run_arms("s", ARMS, partial(square, str(log)), storage_dir=str(tmp_path)) == []
    first = arm_results(open_arms_study("s", storage_dir=str(tmp_path)), ARMS)
    assert sorted(line.split()[0] for line in runs(log)) == ["a", "b", "c"]
    assert run_arms("s", ARMS, partial(square, str(log)), storage_dir=str(tmp_path)) == []
    second = arm_results(open_arms_study("s", storage_dir=str(tmp_path)), ARMS)
    assert len(runs(log)) == 3
    assert list(first["arm"]) == ["a", "b", "c"] and first["value"].tolist() == [97.0**2, 98.0**2, 99.0**2]
    assert first[["arm", "value", "result"]].equals(second[["arm", "value", "result"]])
    assert second["result"].iloc[1] == {"square": 98.0**2, "arm": "b"}
    assert (tmp_path / "s.db").exists()


def flaky(log: str, fail: str, arm: str) -> tuple[float, dict]:
    if arm == fail and not Path(log + ".failed").exists():
        Path(log + ".failed").touch()
        raise RuntimeError("diverged")
    return square(log, arm)


def test_a_failed_arm_is_absent_from_the_table_and_rerun(tmp_path):
    log = str(tmp_path / "log")
    assert run_arms("s", ARMS, partial(flaky, log, "b"), storage_dir=str(tmp_path)) == ["b"]
    study = open_arms_study("s", storage_dir=str(tmp_path))
    assert list(arm_results(study, ARMS)["arm"]) == ["a", "c"]
    assert [trial.state for trial in study.trials if trial.user_attrs["arm"] == "b"] == [TrialState.FAIL]
    assert run_arms("s", ARMS, partial(flaky, log, "b"), storage_dir=str(tmp_path)) == []
    assert [line.split()[0] for line in runs(Path(log))] == ["a", "c", "b"]
    assert list(arm_results(open_arms_study("s", storage_dir=str(tmp_path)), ARMS)["arm"]) == ["a", "b", "c"]


def test_a_changed_fingerprint_reruns_its_arm_and_hides_the_stale_result(tmp_path):
    log = tmp_path / "log"
    run_arms("s", ARMS, partial(square, str(log)), storage_dir=str(tmp_path))
    changed = ARMS | {"b": "f2"}
    assert run_arms("s", changed, partial(square, str(log)), storage_dir=str(tmp_path)) == []
    assert [line.split()[0] for line in runs(log)] == ["a", "b", "c", "b"]
    table = arm_results(open_arms_study("s", storage_dir=str(tmp_path)), changed)
    assert table["number"].tolist() == [0, 3, 2]
    assert arm_results(open_arms_study("s", storage_dir=str(tmp_path)), {"b": "f3"}).empty


def test_an_arm_left_running_by_a_dead_worker_is_rerun(tmp_path):
    study = open_arms_study("s", storage_dir=str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    study.enqueue_trial({}, user_attrs={"arm": "a", "fingerprint": "f1", "worker": f"{socket.gethostname()}:{dead}"})
    study._pop_waiting_trial_id()  # the dead worker's trial, RUNNING
    log = tmp_path / "log"
    run_arms("s", {"a": "f1"}, partial(square, str(log)), storage_dir=str(tmp_path))
    assert runs(log)[0].split()[0] == "a"
    assert study.trials[0].state == TrialState.FAIL


def test_a_worker_that_finds_the_sqlite_file_locked_past_sqlites_own_wait_tries_again_and_runs_every_arm(tmp_path, caplog):
    """Workers started together contend for the file: the one that lost stopped with "database is locked" while its
    peers went on alone, and the run, at half its workers, said so only when they had finished."""
    import logging
    import sqlite3
    import threading

    from fdsml.tuning.arms import work

    retried = threading.Event()

    class Retries(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "trying again" in record.getMessage():
                retried.set()

    def release() -> None:  # another worker's write, held past SQLite's 5 s wait until the worker says it tries again
        retried.wait(60)
        holder.execute("COMMIT")

    study = open_arms_study("s", storage_dir=str(tmp_path))
    holder = sqlite3.connect(tmp_path / "s.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    handler, releaser = Retries(), threading.Thread(target=release)
    logging.getLogger("fdsml.tuning.arms").addHandler(handler)
    releaser.start()
    log = tmp_path / "log"
    try:
        assert work(study, ARMS, partial(square, str(log))) == []
    finally:
        retried.set()  # a worker that never tried again has raised: let the file go
        releaser.join()
        logging.getLogger("fdsml.tuning.arms").removeHandler(handler)
    assert sorted(line.split()[0] for line in runs(log)) == ["a", "b", "c"]
    assert [trial.state for trial in study.trials] == [TrialState.COMPLETE] * 3  # one claim each, none added twice
    assert "locked by another worker: trying again" in caplog.text


def test_a_worker_that_stops_says_so_at_once_rather_than_when_its_peers_finish(tmp_path, caplog):
    from fdsml.tuning.arms import _worker

    (tmp_path / "s.db").write_text("not a database")
    with pytest.raises(Exception, match="not a database"):
        _worker(("s", None, str(tmp_path), ARMS, partial(square, str(tmp_path / "log")), None))
    assert "A worker of study s stopped: the others go on without it" in caplog.text


@pytest.mark.slow
def test_jobs_and_separate_processes_on_one_storage_run_each_arm_exactly_once(tmp_path):
    log = tmp_path / "log"
    arms = {f"arm{i}": "f1" for i in range(12)}
    script = (
        "import sys; from functools import partial; sys.path.insert(0, sys.argv[1]);"
        "from test_arms import slow_square; from fdsml.tuning.arms import run_arms;"
        f"run_arms('s', {arms!r}, partial(slow_square, sys.argv[2]), jobs=2, storage=sys.argv[3])"
    )
    storage = f"journal:{tmp_path / 's.log'}"
    here = str(Path(__file__).parent)
    workers = [subprocess.Popen([sys.executable, "-c", script, here, str(log), storage]) for _ in range(2)]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0]
    names = [line.split()[0] for line in runs(log)]
    assert sorted(names) == sorted(arms)
    assert len({line.split()[1] for line in runs(log)}) >= 2
    table = arm_results(open_arms_study("s", storage=storage), arms)
    assert sorted(table["arm"]) == sorted(arms) and json.dumps(table["result"].tolist())


def visible_devices(log: str, arm: str) -> tuple[float, dict]:
    """Records the GPUs the worker running ``arm`` sees (its CUDA_VISIBLE_DEVICES)."""
    time.sleep(0.5)  # long enough for both workers to take arms
    with open(log, "a") as handle:
        handle.write(f"{arm} {os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')}\n")
    return 0.0, {}


@pytest.mark.slow  # two worker processes of a study: about 12 seconds (`make test` stays under 15 minutes; CI runs it)
def test_each_worker_sees_the_one_device_it_was_given(tmp_path):
    log = tmp_path / "log"
    arms = {f"a{index}": "f1" for index in range(6)}
    assert run_arms("s", arms, partial(visible_devices, str(log)), jobs=2, storage_dir=str(tmp_path), devices=("3", "5")) == []
    seen = {}
    for line in runs(log):
        _, pid, device = line.split()
        seen.setdefault(pid, set()).add(device)
    assert sorted(device for devices in seen.values() for device in devices) == ["3", "5"]  # one device per worker, both used
    assert all(len(devices) == 1 for devices in seen.values())
