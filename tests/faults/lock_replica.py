"""A replica that takes a project's run lock as ``kedro run`` does, under torchrun or alone (the run-lock tests).

``python lock_replica.py PROJECT STOP``: prints ``took`` (it holds the lock), ``joined`` (a replica of its job
holds it) or ``refused <message>`` as one JSON line, then holds until the file STOP exists (at most a minute).
"""

import json
import os
import sys
import time
from pathlib import Path

from fdsml.run_lock import RunLock, RunLockedError


def say(outcome: str, **more: str) -> None:
    """One line in one write: the replicas share the pipe (torchrun runs them unbuffered)."""
    os.write(1, (json.dumps({"rank": os.environ.get("RANK"), "outcome": outcome, **more}) + "\n").encode())


project, stop = Path(sys.argv[1]), Path(sys.argv[2])
lock = RunLock(project)
try:
    lock.acquire()
except RunLockedError as error:
    say("refused", message=str(error)[:2000])
    sys.exit(3)
say("took" if lock._handle else "joined")
deadline = time.monotonic() + 60
while not stop.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
lock.release()
