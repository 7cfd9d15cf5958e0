"""Opening a study's storage: a schema another worker is creating at the same moment is waited for, a lasting fault is not."""

import pytest
import sqlalchemy.exc

from fdsml.config import ConfigError
from fdsml.tuning import storage


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
