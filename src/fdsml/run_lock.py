"""One run at a time per project folder: two ``kedro run`` on the same ``data/`` never interleave writes.

A run takes an exclusive ``flock`` on ``<project>/.fdsml-run.lock`` and writes its PID and
command inside. The kernel drops the lock when the process ends, however it ends, so a crashed
run leaves no stale lock; the PID is only there to name the holder in the refusal. Processes the
run forked (DataLoader workers) share its descriptor and so hold the lock until they exit too: when
the holder has ended, a new run waits up to :data:`ORPHAN_WAIT_S` for them (they notice their
parent is gone within seconds) instead of refusing a restart. The replicas of one ``torchrun`` job
share a run id (``TORCHELASTIC_RUN_ID``, else ``MASTER_ADDR:MASTER_PORT``): they are one run and join
the holder instead of refusing.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from fdsml.atomic import pid_alive
from fdsml.config import ConfigError

LOCK_NAME = ".fdsml-run.lock"
JOIN_WAIT_S = 5.0
ORPHAN_WAIT_S = 30.0  # a DataLoader worker checks for its parent every 5 s


class RunLockedError(ConfigError):
    """Another run is writing to this project folder."""


def job_id() -> str:
    """The id shared by the replicas of one distributed job ("" for a plain run)."""
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        return f"torchelastic:{os.environ['TORCHELASTIC_RUN_ID']}"
    if os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT"):
        return f"master:{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    return ""


class RunLock:
    """The lock of one project folder, held from :meth:`acquire` to :meth:`release`."""

    def __init__(self, project_path: str | os.PathLike):
        self.path = Path(project_path) / LOCK_NAME
        self._handle = None

    def acquire(self) -> None:
        """Take the lock, join the holder when it is a replica of this very job, or raise RunLockedError."""
        deadline = time.monotonic() + ORPHAN_WAIT_S
        while True:
            handle = open(self.path, "a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                handle.close()
            holder = self._holder()
            if job_id() and holder.get("job") == job_id():
                return
            ended = not pid_alive(holder.get("pid"))
            if not ended:
                raise RunLockedError(
                    f"{self.path.parent}: another run is writing to this project (PID {holder.get('pid', '?')}: "
                    f"{holder.get('command', 'unknown command')}); wait for it to finish, or stop that process, then run again"
                )
            if time.monotonic() > deadline:
                raise RunLockedError(
                    f"{self.path.parent}: the run that held this project (PID {holder.get('pid', '?')}: "
                    f"{holder.get('command', 'unknown command')}) has ended, but processes it started still hold its lock "
                    f"after {ORPHAN_WAIT_S:.0f} s; stop them (`fuser {self.path}` lists them), then run again"
                )
            time.sleep(0.2)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "job": job_id(), "command": " ".join(sys.argv)}))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Drop the lock (a no-op for a replica that joined, or when nothing is held)."""
        if self._handle is None:
            return
        self._handle.truncate(0)
        self._handle.close()
        self._handle = None

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


class RunLockHooks:
    """Kedro hooks: the project's run lock is held for the whole pipeline run."""

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
