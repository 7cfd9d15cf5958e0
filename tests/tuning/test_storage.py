"""Opening a study's storage: a schema another worker is creating at the same moment is waited for, a lasting fault is not,
and a server that never answers stops the study after its connection time-out."""

import socket
import threading

import pytest
import sqlalchemy.exc

from fdsml.config import ConfigError
from fdsml.tuning import storage
from tests.dependencies import require_module

SECRET = "storage-secret-71ae"


def test_a_storage_whose_schema_another_process_is_creating_opens_on_a_later_try(tmp_path, monkeypatch):
    made = []

    def racing(location, **options):  # the first try loses the race to create the schema, as a second worker's would
        if not made:
            made.append(location)
            raise sqlalchemy.exc.IntegrityError("INSERT INTO alembic_version", (), Exception("UNIQUE constraint failed"))
        return real(location, **options)

    real = storage.RDBStorage
    monkeypatch.setattr(storage, "RDBStorage", racing)
    monkeypatch.setattr(storage.time, "sleep", lambda seconds: None)
    location = storage.storage_location(None, str(tmp_path), "raced")
    opened = storage.open_storage(location)
    assert made == [location] and isinstance(opened, real)


def test_a_lasting_database_fault_is_not_retried_and_names_the_key(tmp_path, monkeypatch):
    calls = []

    def broken(location, **options):
        calls.append(location)
        raise sqlalchemy.exc.OperationalError("connect", (), Exception("connection refused"))

    monkeypatch.setattr(storage, "RDBStorage", broken)
    with pytest.raises(ConfigError, match="tune.storage: cannot open"):
        storage.open_storage("postgresql://nobody@127.0.0.1:9/none")
    assert len(calls) == 1


def test_a_database_lost_mid_study_is_one_error_naming_the_storage_without_its_password():
    location = "postgresql://tuner:s3cret@db-host:5432/studies"
    lost = sqlalchemy.exc.OperationalError("UPDATE trials", (), Exception("server closed the connection unexpectedly\nbefore or while"))
    with pytest.raises(storage.StorageLostError) as caught:
        with storage.storage_answering(location):
            try:
                raise lost
            except sqlalchemy.exc.OperationalError:  # Optuna's own error while recording the trial's end
                raise UnboundLocalError("cannot access local variable 'updated_state'")
    message = str(caught.value)
    assert message.startswith("tune.storage: 'postgresql://tuner:***@db-host:5432/studies' stopped answering mid-study")
    assert "(Exception: server closed the connection unexpectedly);" in message and "s3cret" not in message and "\n" not in message
    with pytest.raises(ZeroDivisionError):  # not a database fault: untouched
        with storage.storage_answering(location):
            1 / 0


@pytest.fixture
def silent_server():
    """A PostgreSQL address whose server never answers: the kernel accepts the connection, nothing replies."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"postgresql://tuner:{SECRET}@127.0.0.1:{listener.getsockname()[1]}/studies"
    listener.close()


def _opened_within(location: str, seconds: float) -> BaseException:
    """What opening ``location`` raised, failing the test when it had not returned after ``seconds``."""
    outcome: list[BaseException] = []

    def open_it():
        try:
            storage.open_storage(location)
        except BaseException as error:  # noqa: BLE001 (handed to the test)
            outcome.append(error)

    opener = threading.Thread(target=open_it, daemon=True)
    opener.start()
    opener.join(seconds)
    assert outcome, f"opening a storage whose server never answers still waits after {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("timeout, query", [(1, ""), (30, "?connect_timeout=1")], ids=["default", "the-url's-own"])
def test_a_server_that_never_answers_stops_the_study_after_the_connect_timeout_naming_the_key(silent_server, monkeypatch, timeout, query):
    require_module("psycopg", "PostgreSQL's driver is not installed: pip install -e '.[team]'")
    monkeypatch.setattr(storage, "CONNECT_TIMEOUT_S", timeout)
    error = _opened_within(silent_server + query, 20)
    assert isinstance(error, ConfigError) and SECRET not in str(error)
    assert str(error).startswith(f"tune.storage: cannot open '{silent_server.replace(SECRET, '***')}{query}'")
    assert "(no answer within 1 s: is the server up and reachable? a URL's ?connect_timeout=N waits N s)" in str(error)
