"""One job at a time per project folder: two ``kedro run`` on the same ``data/`` never interleave writes.

A run takes an exclusive ``flock`` on ``<project>/.fdsml-run.lock`` (mode 0600) and writes who holds it
inside: host, PID, its job's identity and its command line with credentials masked. The kernel drops
the lock when the process ends, however it ends, so a crashed run leaves no stale lock; the host and
PID are only there to name the holder in the refusal. ``kedro run`` takes it first thing, before
the heavy imports, so a second run is refused at once; ``kedro runs remove`` takes it too. Processes
the run forked (DataLoader workers) share its descriptor and so hold the lock until they exit: when
the holder has ended, a new run waits up to :data:`ORPHAN_WAIT_S` for them (they notice their parent
is gone within seconds) instead of refusing a restart.

The replicas of one ``torchrun`` job are one run: rank 0 draws a random token and puts it in the
job's own store (torchrun's agent store at ``MASTER_ADDR:MASTER_PORT``, which only the job's
processes are pointed at), every replica reads it there, and the lock records its digest; a
replica joins a holder with the same digest. Nothing an unrelated process has (``TORCHELASTIC_RUN_ID``
is ``none`` for every plain ``torchrun``) lets it join.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from fdsml.atomic import pid_alive
from fdsml.config import ConfigError
from fdsml.credentials import masked

LOCK_NAME = ".fdsml-run.lock"
JOIN_WAIT_S = 5.0
ORPHAN_WAIT_S = 30.0  # a DataLoader worker checks for its parent every 5 s
TOKEN_WAIT_S = 600.0  # how long a replica waits for rank 0 to publish the job's token (rank 0 may start late)
TOKEN_KEY = "fdsml/run_lock/token"


class RunLockedError(ConfigError):
    """Another run is writing to this project folder."""


@functools.cache
def job_token() -> str:
    """The digest of this ``torchrun`` job's token, the same on every replica ("" outside torchrun).

    Rank 0 draws the token and sets it in torchrun's agent store; every replica gets it from there
    (waiting for rank 0). A restarted job (``TORCHELASTIC_RESTART_COUNT``) draws a new one."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or not os.environ.get("MASTER_PORT"):
        return ""
    from datetime import timedelta

    from torch.distributed import TCPStore  # here: only a torchrun replica pays for importing torch first

    store = TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=TOKEN_WAIT_S)
    )
    key = f"{TOKEN_KEY}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    if int(os.environ.get("RANK", "0")) == 0:
        store.set(key, secrets.token_hex(16))
    return hashlib.sha256(store.get(key)).hexdigest()


class RunLock:
    """The lock of one project folder, held from :meth:`acquire` to :meth:`release`."""

    def __init__(self, project_path: str | os.PathLike):
        self.path = Path(project_path) / LOCK_NAME
        self._handle = None

    def acquire(self) -> None:
        """Take the lock; join the holder when it is this process or a replica of this very job; else RunLockedError."""
        token = job_token()  # first: rank 0 publishes the token whichever replica holds the lock
        deadline = time.monotonic() + ORPHAN_WAIT_S
        while True:
            handle = os.fdopen(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600), "r+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                handle.close()
            holder = self._holder()
            if self._joins(holder):
                return
            who = f"PID {holder.get('pid', '?')}: {masked(str(holder.get('command', 'unknown command')))}"
            host = holder.get("host", socket.gethostname())
            if host != socket.gethostname() or pid_alive(holder.get("pid")):
                where = "" if host == socket.gethostname() else f" on {host}"
                raise RunLockedError(
                    f"{self.path.parent}: another run{where} is writing to this project ({who}); wait for it to finish, "
                    "or stop that process, then run again"
                )
            if time.monotonic() > deadline:
                raise RunLockedError(
                    f"{self.path.parent}: the run that held this project ({who}) has ended, but processes it started still "
                    f"hold its lock after {ORPHAN_WAIT_S:.0f} s; stop them (`fuser {self.path}` lists them), then run again"
                )
            time.sleep(0.2)
        os.fchmod(handle.fileno(), 0o600)  # a lock file an older version left 0644
        handle.seek(0)
        handle.truncate()
        record = {"host": socket.gethostname(), "pid": os.getpid(), "job": token, "command": masked(" ".join(sys.argv))}
        handle.write(json.dumps(record))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Drop the lock (a no-op for a replica that joined, or when nothing is held)."""
        if self._handle is None:
            return
        self._handle.truncate(0)
        self._handle.close()
        self._handle = None

    @staticmethod
    def _joins(holder: dict[str, Any]) -> bool:
        """Whether the holder is this very process (the command line took the lock before the run's hooks) or a
        replica of this torchrun job."""
        if holder.get("host") == socket.gethostname() and holder.get("pid") == os.getpid():
            return True
        return bool(holder.get("job")) and holder.get("job") == job_token()

    def _holder(self) -> dict[str, Any]:
        """What the holder wrote; waits briefly, since a replica may test the lock before the holder writes."""
        deadline = time.monotonic() + JOIN_WAIT_S
        while True:
            try:
                return json.loads(self.path.read_text())
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    return {}
                time.sleep(0.05)


@contextmanager
def holding_the_project(project_path: str | os.PathLike | None = None) -> Iterator[None]:
    """Hold the project's run lock for the block (``project_path``: the Kedro project around the working folder)."""
    if project_path is None:
        from kedro.utils import find_kedro_project

        project_path = find_kedro_project(Path.cwd()) or Path.cwd()
    lock = RunLock(project_path)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


class RunLockHooks:
    """Kedro hooks: the project's run lock is held for the whole pipeline run (joined when ``kedro run`` holds it)."""

    def __init__(self):
        self._lock: RunLock | None = None

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any]) -> None:
        self._lock = RunLock(run_params.get("project_path") or Path.cwd())
        self._lock.acquire()

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._release()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
