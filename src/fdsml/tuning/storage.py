"""Where a study's trials live: Optuna's RDB storage (SQLite by default, PostgreSQL for a team) or its journal file.

``tune.storage`` is ``null`` (an SQLite file ``<storage_dir>/<study>.db``), an SQLAlchemy URL
(``sqlite:///path.db``, ``postgresql://user@host/db`` with the password in ``~/.pgpass``), or Optuna's journal file:
``journal:PATH`` or a path ending ``.log`` / ``.jsonl`` (processes on machines sharing a file system).
A storage that cannot be opened stops the study before any trial, naming ``tune.storage`` (a server that
never answers: after :data:`CONNECT_TIMEOUT_S`), its password masked.

A worker killed mid-trial leaves its trial RUNNING in the storage. Each trial records its worker
(host and PID); a worker starting on that host marks the trials of workers that are gone FAIL
(:func:`fail_trials_of_dead_workers`), so a killed trial is never counted and never blocks the
budget. RDB storages also carry Optuna's heartbeat, which fails a trial whose worker stopped
beating on any machine after its grace period; a study's worker then runs that trial's
parameters again (once: ``retry_stale``), since a killed run says nothing about them.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna
import sqlalchemy.engine
import sqlalchemy.exc
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from fdsml.atomic import pid_alive
from fdsml.config import ConfigError
from fdsml.credentials import masked
from fdsml.errors import UserFixableError

HEARTBEAT_S = 60
HEARTBEAT_GRACE_S = 180
STALE_RETRIES = 1
OPEN_ATTEMPTS = 5
"""Tries at opening an RDB storage: workers (or a reader) started at once on a new database race to
create its schema, and the losers' inserts of the same schema version fail; a later try finds it made."""
JOURNAL_SUFFIXES = (".log", ".jsonl")
CONNECT_TIMEOUT_S = 30
"""How long opening a connection waits for a database server (PostgreSQL's and MySQL's ``connect_timeout``) unless the
URL sets its own (``?connect_timeout=N``): a server that never answers stops the run instead of hanging it."""
TIMED_DIALECTS = ("postgresql", "mysql")


def storage_location(storage: str | None, storage_dir: str, study: str) -> str:
    """The storage URL or journal location ``tune.storage`` names (``None``: the study's SQLite file)."""
    if storage is None:
        return f"sqlite:///{Path(storage_dir) / f'{study}.db'}"
    if storage.startswith("journal:") or "://" in storage:
        return storage
    if storage.endswith(JOURNAL_SUFFIXES):
        return f"journal:{storage}"
    raise ConfigError(
        f"tune.storage: {shown(storage)} is neither a database URL (sqlite:///path.db, postgresql://user@host/db) nor a "
        f"journal file (journal:PATH or a path ending {' or '.join(JOURNAL_SUFFIXES)})"
    )


def open_storage(
    location: str, heartbeat_s: int = HEARTBEAT_S, grace_s: int = HEARTBEAT_GRACE_S, retry_stale: bool = False
) -> optuna.storages.BaseStorage:
    """Open (creating when new) the storage at ``location``; ConfigError naming ``tune.storage`` when it cannot be.

    An RDB storage's running trials beat every ``heartbeat_s``; one silent for ``grace_s`` is failed by the next
    worker that looks, which (``retry_stale``) queues its parameters again."""
    try:
        if location.startswith("journal:"):
            path = Path(location.removeprefix("journal:"))
            if not path.parent.is_dir():
                raise ConfigError(f"tune.storage: the journal file's folder {path.parent} does not exist")
            return JournalStorage(JournalFileBackend(str(path)))
        if location.startswith("sqlite:///"):
            Path(location.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return _rdb_storage(location, heartbeat_s, grace_s, retry_stale)
    except ConfigError:
        raise
    except Exception as error:  # SQLAlchemy, a missing driver, an unreachable server: all mean "cannot open"
        waited = "" if "timeout" not in fault(error).lower() else (
            f" (no answer within {_connect_timeout(location)} s: is the server up and reachable? a URL's "
            "?connect_timeout=N waits N s)"
        )
        raise ConfigError(f"tune.storage: cannot open {shown(location)}: {fault(error)}{waited}") from error


class StorageLostError(UserFixableError, ConnectionError):
    """The study's storage stopped answering mid-study (a database server stopped or unreachable)."""


@contextmanager
def storage_answering(location: str) -> Iterator[None]:
    """Turn a database fault mid-study into one message naming ``tune.storage`` and how to resume."""
    try:
        yield
    except Exception as error:
        database = database_fault(error)
        if database is None:
            raise
        raise StorageLostError(
            f"tune.storage: {shown(location)} stopped answering mid-study ({fault(database)}); every trial it recorded "
            "stays there: start it again and rerun the same command, the study resumes"
        ) from error


def database_fault(error: BaseException | None) -> sqlalchemy.exc.SQLAlchemyError | None:
    """The database error in ``error``'s chain: Optuna, failing to record a trial's end on a lost server, raises
    an error of its own while handling it."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, sqlalchemy.exc.SQLAlchemyError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def shown(location: str) -> str:
    """``location`` as a message may show it, quoted: a database URL's password hidden."""
    return repr(masked(location))


def fault(error: Exception) -> str:
    """A storage error in one line: the database driver's own first line (``FATAL: password authentication failed``,
    ``database "x" does not exist``, ``connection refused``), without SQLAlchemy's statement and links."""
    cause = getattr(error, "orig", None) or error
    first = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
    return f"{type(cause).__name__}: {first}"


def _schema_race(error: Exception) -> bool:
    """Whether ``error`` is another process creating the same schema at the same moment (not a lasting fault)."""
    text = str(error).lower()
    return isinstance(error, sqlalchemy.exc.IntegrityError) or (
        isinstance(error, sqlalchemy.exc.OperationalError) and ("already exists" in text or "locked" in text)
    )


def _new_rdb_storage(location: str, heartbeat_s: int, grace_s: int, retry_stale: bool) -> RDBStorage:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # the heartbeat: in Optuna since 2.9
        retry = RetryHeartbeatStaleTrialCallback(max_retry=STALE_RETRIES) if retry_stale else None
        return RDBStorage(
            location, engine_kwargs=_engine_options(location), heartbeat_interval=heartbeat_s, grace_period=grace_s,
            heartbeat_stale_trial_callback=retry,
        )


def _engine_options(location: str) -> dict:
    """SQLAlchemy's engine options for ``location``: a server's connection time-out (:data:`CONNECT_TIMEOUT_S`)."""
    url = sqlalchemy.engine.make_url(location)
    if url.get_backend_name() not in TIMED_DIALECTS or "connect_timeout" in url.query:
        return {}
    return {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}


def _connect_timeout(location: str) -> str:
    """The seconds opening ``location`` waits for its server: the URL's ``connect_timeout``, else :data:`CONNECT_TIMEOUT_S`."""
    return str(sqlalchemy.engine.make_url(location).query.get("connect_timeout", CONNECT_TIMEOUT_S))


def _rdb_storage(location: str, *heartbeat) -> RDBStorage:
    """Optuna's RDB storage at ``location``, with its heartbeat; tried again while another process creates its schema."""
    for attempt in range(1, OPEN_ATTEMPTS):
        try:
            return _new_rdb_storage(location, *heartbeat)
        except sqlalchemy.exc.SQLAlchemyError as error:
            if not _schema_race(error):
                raise
            time.sleep(0.2 * attempt)
    return _new_rdb_storage(location, *heartbeat)


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
