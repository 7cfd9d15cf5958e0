"""Where a study's trials live: Optuna's RDB storage (SQLite by default, PostgreSQL for a team) or its journal file.

``tune.storage`` is ``null`` (an SQLite file ``<storage_dir>/<study>.db``), an SQLAlchemy URL
(``sqlite:///path.db``, ``postgresql://user:password@host/db``), or Optuna's journal file:
``journal:PATH`` or a path ending ``.log`` / ``.jsonl`` (processes on machines sharing a file system).
A storage that cannot be opened stops the study before any trial, naming ``tune.storage``.

A worker killed mid-trial leaves its trial RUNNING in the storage. Each trial records its worker
(host and PID); a worker starting on that host marks the trials of workers that are gone FAIL
(:func:`fail_trials_of_dead_workers`), so a killed trial is never counted and never blocks the
budget. RDB storages also carry Optuna's heartbeat, which fails a trial whose worker stopped
beating on any machine after ``HEARTBEAT_GRACE_S``.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from pathlib import Path

import optuna
import sqlalchemy.exc
from optuna.storages import RDBStorage
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from fdsml.atomic import pid_alive
from fdsml.config import ConfigError

HEARTBEAT_S = 60
HEARTBEAT_GRACE_S = 180
OPEN_ATTEMPTS = 5
"""Tries at opening an RDB storage: workers (or a reader) started at once on a new database race to
create its schema, and the losers' inserts of the same schema version fail; a later try finds it made."""
JOURNAL_SUFFIXES = (".log", ".jsonl")


def storage_location(storage: str | None, storage_dir: str, study: str) -> str:
    """The storage URL or journal location ``tune.storage`` names (``None``: the study's SQLite file)."""
    if storage is None:
        return f"sqlite:///{Path(storage_dir) / f'{study}.db'}"
    if storage.startswith("journal:") or "://" in storage:
        return storage
    if storage.endswith(JOURNAL_SUFFIXES):
        return f"journal:{storage}"
    raise ConfigError(
        f"tune.storage: {storage!r} is neither a database URL (sqlite:///path.db, postgresql://user@host/db) nor a "
        f"journal file (journal:PATH or a path ending {' or '.join(JOURNAL_SUFFIXES)})"
    )


def open_storage(location: str) -> optuna.storages.BaseStorage:
    """Open (creating when new) the storage at ``location``; ConfigError naming ``tune.storage`` when it cannot be."""
    try:
        if location.startswith("journal:"):
            path = Path(location.removeprefix("journal:"))
            if not path.parent.is_dir():
                raise ConfigError(f"tune.storage: the journal file's folder {path.parent} does not exist")
            return JournalStorage(JournalFileBackend(str(path)))
        if location.startswith("sqlite:///"):
            Path(location.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return _rdb_storage(location)
    except ConfigError:
        raise
    except Exception as error:  # SQLAlchemy, a missing driver, an unreachable server: all mean "cannot open"
        raise ConfigError(f"tune.storage: cannot open {location!r}: {type(error).__name__}: {error}") from error


def _schema_race(error: Exception) -> bool:
    """Whether ``error`` is another process creating the same schema at the same moment (not a lasting fault)."""
    text = str(error).lower()
    return isinstance(error, sqlalchemy.exc.IntegrityError) or (
        isinstance(error, sqlalchemy.exc.OperationalError) and ("already exists" in text or "locked" in text)
    )


def _new_rdb_storage(location: str) -> RDBStorage:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # the heartbeat: in Optuna since 2.9
        return RDBStorage(location, heartbeat_interval=HEARTBEAT_S, grace_period=HEARTBEAT_GRACE_S)


def _rdb_storage(location: str) -> RDBStorage:
    """Optuna's RDB storage at ``location``, with its heartbeat; tried again while another process creates its schema."""
    for attempt in range(1, OPEN_ATTEMPTS):
        try:
            return _new_rdb_storage(location)
        except sqlalchemy.exc.SQLAlchemyError as error:
            if not _schema_race(error):
                raise
            time.sleep(0.2 * attempt)
    return _new_rdb_storage(location)


def worker_name() -> str:
    """This process as a trial's ``worker`` user attribute: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def fail_trials_of_dead_workers(study: optuna.Study) -> list[int]:
    """Mark FAIL the RUNNING trials whose worker ran on this host and has ended; their numbers."""
    host = socket.gethostname()
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker_host, _, pid = str(trial.user_attrs.get("worker", "")).rpartition(":")
        if worker_host == host and pid.isdigit() and not pid_alive(int(pid)):
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            failed.append(trial.number)
    return failed
