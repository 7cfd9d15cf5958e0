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
