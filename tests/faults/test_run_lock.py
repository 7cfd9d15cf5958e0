"""Two runs at once: the second refuses naming the first; a crashed run's lock is stale; torchrun replicas are one run."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fdsml import run_lock
from fdsml.run_lock import LOCK_NAME, RunLock, RunLockedError, RunLockHooks
from tests.faults.kill_harness import TINY
from tests.support import ROOT, make_project

HOLD = "import sys, time; from fdsml.run_lock import RunLock; lock = RunLock(sys.argv[1]); lock.acquire(); print('held', flush=True); time.sleep(120)"
# A run that forked a worker (as a DataLoader does): the worker inherits the lock's descriptor and outlives the run by argv[2] s.
HOLD_WITH_WORKER = (
    "import os, sys, time; from fdsml.run_lock import RunLock; lock = RunLock(sys.argv[1]); lock.acquire(); worker = os.fork()\n"
    "if worker == 0: time.sleep(float(sys.argv[2])); os._exit(0)\n"
    "print('held', worker, flush=True); time.sleep(120)"
)
JOB_ENV = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def plain_run(monkeypatch):
    for name in JOB_ENV:
        monkeypatch.delenv(name, raising=False)


def hold(project: Path, *extra: str, script: str = HOLD, **env: str) -> subprocess.Popen:
    """Another process holding the project's run lock."""
    environment = {k: v for k, v in os.environ.items() if k not in JOB_ENV} | {"PYTHONPATH": str(ROOT / "src")} | env
    holder = subprocess.Popen([sys.executable, "-c", script, str(project), *extra], env=environment, stdout=subprocess.PIPE, text=True)
    holder.said = holder.stdout.readline().split()
    assert holder.said[:1] == ["held"]
    return holder


def killed_with_a_worker(project: Path, worker_lives_s: float) -> int:
    """A run killed while the worker it forked still runs (and holds the lock): the worker's PID."""
    run = hold(project, str(worker_lives_s), script=HOLD_WITH_WORKER)
    run.send_signal(signal.SIGKILL)
    run.wait()
    return int(run.said[1])


@pytest.fixture
def holders():
    started = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def test_a_second_kedro_run_refuses_naming_the_running_process_and_writes_nothing(tmp_path, holders):
    project = make_project(tmp_path / "project", TINY)
    holders.append(first := hold(project))
    env = os.environ | {"KEDRO_DISABLE_TELEMETRY": "1", "PYTHONPATH": str(ROOT / "src"), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    second = subprocess.run(["kedro", "run", "--pipelines=fractals"], cwd=project, env=env, capture_output=True, text=True)
    output = " ".join((second.stdout + second.stderr).split())
    assert second.returncode != 0
    assert f"another run is writing to this project (PID {first.pid}" in output
    assert not [p for p in (project / "data").rglob("*") if p.is_file()]


def test_the_lock_is_released_at_the_end_of_a_run(tmp_path, holders):
    hooks = RunLockHooks()
    hooks.before_pipeline_run({"project_path": str(tmp_path)})
    with pytest.raises(RunLockedError):
        RunLock(tmp_path).acquire()
    hooks.after_pipeline_run()
    holders.append(hold(tmp_path))  # another process can now take it


def test_a_crashed_run_leaves_a_stale_lock_that_the_next_run_takes(tmp_path, holders):
    crashed = hold(tmp_path)
    crashed.send_signal(signal.SIGKILL)
    crashed.wait()
    assert str(crashed.pid) in (tmp_path / LOCK_NAME).read_text()  # its PID is still written there
    lock = RunLock(tmp_path)
    lock.acquire()
    assert f'"pid": {os.getpid()}' in (tmp_path / LOCK_NAME).read_text()
    lock.release()


@pytest.mark.parametrize(
    "job, other",
    [
        ({"TORCHELASTIC_RUN_ID": "job-1"}, {"TORCHELASTIC_RUN_ID": "job-2"}),
        ({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}, {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29501"}),
    ],
    ids=["torchelastic", "master-address"],
)
def test_replicas_of_one_torchrun_job_are_one_run(tmp_path, holders, monkeypatch, job, other):
    holders.append(hold(tmp_path, **job))
    for name, value in other.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RunLockedError, match="another run"):
        RunLock(tmp_path).acquire()
    for name, value in job.items():
        monkeypatch.setenv(name, value)
    replica = RunLock(tmp_path)
    replica.acquire()  # joins the job's lock instead of refusing
    replica.release()
    with pytest.raises(RunLockedError):  # a replica leaving does not free the job's lock
        monkeypatch.delenv(next(iter(job)))
        RunLock(tmp_path).acquire()


def test_a_restart_waits_for_the_workers_a_killed_run_forked(tmp_path):
    killed_with_a_worker(tmp_path, worker_lives_s=1.5)
    lock = RunLock(tmp_path)
    lock.acquire()  # refused at once before: the worker still held the lock, though its run had ended
    assert f'"pid": {os.getpid()}' in (tmp_path / LOCK_NAME).read_text()
    lock.release()


def test_workers_outliving_the_wait_are_named_as_leftovers_of_an_ended_run(tmp_path, monkeypatch):
    monkeypatch.setattr(run_lock, "ORPHAN_WAIT_S", 0.5)
    worker = killed_with_a_worker(tmp_path, worker_lives_s=60)
    try:
        with pytest.raises(RunLockedError, match="has ended, but processes it started still hold its lock"):
            RunLock(tmp_path).acquire()
    finally:
        os.kill(worker, signal.SIGKILL)
