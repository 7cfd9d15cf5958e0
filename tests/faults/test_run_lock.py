"""Two runs at once: the second refuses naming the first, before it imports torch; a crashed run's lock is stale; the
replicas of one torchrun job are one run, and no other job or process shares their lock; deleting run folders takes it."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fdsml import run_lock
from fdsml.run_lock import LOCK_NAME, RunLock, RunLockedError, RunLockHooks
from tests.faults.kill_harness import TINY
from tests.servers import free_port
from tests.support import ROOT, make_project

HOLD = "import sys, time; from fdsml.run_lock import RunLock; lock = RunLock(sys.argv[1]); lock.acquire(); print('held', flush=True); time.sleep(120)"
# A run that forked a worker (as a DataLoader does): the worker inherits the lock's descriptor and outlives the run by argv[2] s.
HOLD_WITH_WORKER = (
    "import os, sys, time; from fdsml.run_lock import RunLock; lock = RunLock(sys.argv[1]); lock.acquire(); worker = os.fork()\n"
    "if worker == 0: time.sleep(float(sys.argv[2])); os._exit(0)\n"
    "print('held', worker, flush=True); time.sleep(120)"
)
JOB_ENV = ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
SECRET = "lock-secret-5d1c"
KEDRO_ENV = {"KEDRO_DISABLE_TELEMETRY": "1", "PYTHONPATH": str(ROOT / "src"), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


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


def test_a_second_kedro_run_refuses_at_once_naming_the_first_without_its_password_and_writes_nothing(tmp_path, holders):
    project = make_project(tmp_path / "project", TINY)
    argv = f"import sys; sys.argv[2:] = ['run', '--params=tune.storage=postgresql://tuner:{SECRET}@db/studies']; "
    holders.append(first := hold(project, script=argv + HOLD))
    assert (project / LOCK_NAME).stat().st_mode & 0o777 == 0o600 and SECRET not in (project / LOCK_NAME).read_text()
    command = [sys.executable, "-X", "importtime", "-m", "kedro", "run", "--pipelines=fractals"]
    second = subprocess.run(command, cwd=project, env=os.environ | KEDRO_ENV, capture_output=True, text=True)
    output = " ".join(line for line in (second.stdout + second.stderr).splitlines() if not line.startswith("import time:"))
    assert second.returncode != 0
    assert f"another run is writing to this project (PID {first.pid}: -c {project} run --params=tune.storage=postgresql://tuner:***@db" in output
    imported = {line.split("|")[-1].strip() for line in second.stderr.splitlines() if line.startswith("import time:")}
    assert "fdsml.run_lock" in imported and "torch" not in imported, "refused before the run's heavy imports"
    assert not [p for p in (project / "data").rglob("*") if p.is_file()]
    assert SECRET not in output and SECRET not in (project / "info.log").read_text()


def test_the_lock_is_released_at_the_end_of_a_run(tmp_path, holders):
    hooks = RunLockHooks()
    hooks.before_pipeline_run({"project_path": str(tmp_path)})
    RunLock(tmp_path).acquire()  # this very process: the command line held it before the hooks, which join it
    refused = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path)], env=os.environ | KEDRO_ENV, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and f"(PID {os.getpid()}" in refused.stderr
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


def _torchrun(project: Path, stop: Path, rendezvous: int) -> subprocess.Popen:
    """A plain two-node-style ``torchrun`` job (c10d rendezvous without --rdzv_id: TORCHELASTIC_RUN_ID is ``none``) of two
    replicas of :mod:`tests.faults.lock_replica`; its replicas' outcomes are its first lines."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--node_rank=0", "--nproc_per_node=2", "--rdzv_backend=c10d",
        f"--rdzv_endpoint=127.0.0.1:{rendezvous}", str(ROOT / "tests/faults/lock_replica.py"), str(project), str(stop),
    ]
    env = os.environ | KEDRO_ENV | {"OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _outcomes(job: subprocess.Popen) -> list[str]:
    return sorted(json.loads(job.stdout.readline())["outcome"] for _ in range(2))


@pytest.mark.slow  # three torchrun jobs: about 30 s on 2 busy cores
def test_the_replicas_of_one_torchrun_job_share_the_lock_and_no_other_job_or_process_does(tmp_path, holders):
    stop = tmp_path / "stop"
    port = free_port()
    job = _torchrun(tmp_path, stop, port)
    try:
        assert _outcomes(job) == ["joined", "took"], job.stderr.read()[-3000:] if job.poll() is not None else ""
        other_job = _torchrun(tmp_path, tmp_path / "never", free_port())  # its TORCHELASTIC_RUN_ID is `none` too
        assert _outcomes(other_job) == ["refused", "refused"] and other_job.wait(timeout=60) != 0
        plain = os.environ | KEDRO_ENV | {"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        unrelated = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path)], env=plain, capture_output=True, text=True, timeout=60)
        assert unrelated.returncode != 0 and "another run is writing to this project" in unrelated.stderr
    finally:
        stop.touch()
    assert job.wait(timeout=60) == 0
    holders.append(hold(tmp_path))  # the job's lock went with it


def test_kedro_runs_remove_refuses_while_a_run_holds_the_project(tmp_path, holders):
    project = make_project(tmp_path / "project", TINY)
    run_dir = project / "data/06_models/pretrain_run"
    (run_dir / "0123456789abcdef").mkdir(parents=True)
    (run_dir / "0123456789abcdef/last.pt").write_bytes(b"being written")
    holders.append(first := hold(project))
    command = [sys.executable, "-m", "kedro", "runs", "remove", "--run-dir", str(run_dir), "--keep", "0"]
    refused = subprocess.run(command, cwd=project, env=os.environ | KEDRO_ENV, capture_output=True, text=True)
    assert refused.returncode != 0 and f"another run is writing to this project (PID {first.pid}" in refused.stderr
    assert (run_dir / "0123456789abcdef/last.pt").read_bytes() == b"being written"
    first.kill()
    first.wait()
    removed = subprocess.run(command, cwd=project, env=os.environ | KEDRO_ENV, capture_output=True, text=True)
    assert removed.returncode == 0 and not (run_dir / "0123456789abcdef").exists(), removed.stderr


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
