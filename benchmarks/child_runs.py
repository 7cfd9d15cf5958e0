"""Child processes that cannot hang their parent, and a table that survives a killed run.

Every child writes its output to a file (a pipe that nobody reads fills and blocks the child),
runs in a session of its own (a timeout kills it and everything it started, e.g. torchrun's
replicas) and is waited for with a timeout. :class:`TableFile` rewrites its file atomically after
every row, so a check killed part-way keeps the rows it finished.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fdsml.atomic import atomic_path


@dataclass
class Child:
    """A started child process, its output going to ``log``."""

    process: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def last_line(self, width: int = 160) -> str:
        lines = self.output().strip().splitlines()
        return lines[-1][:width] if lines else "(no output)"

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 30.0) -> None:
        """Signal the child's whole session, then kill what is left after ``grace_s``."""
        for signal_number, wait_s in ((sig, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.process.pid, signal_number)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue

    def wait(self, timeout_s: float, until: Callable[[], bool] | None = None) -> int | None:
        """The exit status, or None when the child ran past ``timeout_s`` (it is then killed) or ``until``
        became true first (it is left running)."""
        deadline = time.monotonic() + timeout_s
        while self.process.poll() is None:
            if until is not None and until():
                return None
            if time.monotonic() > deadline:
                self.stop()
                return None
            time.sleep(0.05)
        return self.process.returncode


def start(command: list[str], log: Path, env: dict | None = None) -> Child:
    """Start ``command`` with its stdout and stderr in ``log``, in a new session."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=env)
    return Child(process, log)


def run(command: list[str], log: Path, timeout_s: float, env: dict | None = None) -> tuple[int | None, Child]:
    """Run ``command`` to its end or its timeout: (exit status, None on timeout; the child)."""
    child = start(command, log, env)
    return child.wait(timeout_s), child


@dataclass
class TableFile:
    """A text table written to ``path`` as its rows come (atomically: a reader sees whole rows)."""

    path: Path
    title: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, name: str, status: str, detail: str) -> None:
        self.rows.append((name, status, detail))
        with atomic_path(self.path) as temporary:
            temporary.write_text(self.text())

    def text(self) -> str:
        width = max([len("check")] + [len(name) for name, _, _ in self.rows])
        lines = [self.title, f"{'check':<{width}}  {'status':<12}  detail"]
        lines += [f"{name:<{width}}  {status:<12}  {detail}" for name, status, detail in self.rows]
        return "\n".join(lines) + "\n"
