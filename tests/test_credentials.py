"""Credentials never shown: a URL's password (whole, even holding '@'), credential query values, and every log record."""

import logging
import subprocess
import sys

import pytest

from fdsml.credentials import mask_log_records, masked
from fdsml.tuning.storage import shown, storage_location

SECRET = "p@ss-w0rd"


@pytest.mark.parametrize(
    "text, expected",
    [
        (f"postgresql://tuner:{SECRET}@db-host:5432/studies", "postgresql://tuner:***@db-host:5432/studies"),
        (f"postgresql+psycopg://:{SECRET}@db-host/studies", "postgresql+psycopg://:***@db-host/studies"),
        (
            f"kedro run --params=tune.storage=postgresql://a:{SECRET}@h1/db,study.storage=mysql://b:{SECRET}@h2/db now",
            "kedro run --params=tune.storage=postgresql://a:***@h1/db,study.storage=mysql://b:***@h2/db now",
        ),
        (f"postgresql://db-host/studies?user=tuner&password={SECRET}&sslmode=require", "postgresql://db-host/studies?user=tuner&password=***&sslmode=require"),
        (f"cannot open 'postgresql://tuner:{SECRET}@db-host/studies': refused", "cannot open 'postgresql://tuner:***@db-host/studies': refused"),
    ],
)
def test_a_urls_password_is_masked_whole(text, expected):
    assert masked(text) == expected


@pytest.mark.parametrize("text", ["postgresql://tuner@db-host/studies", "sqlite:///data/a@b/study.db", "journal:/shared/x.log", "no URL at all"])
def test_what_holds_no_password_is_shown_as_it_is(text):
    assert masked(text) == text


def test_a_storage_error_never_shows_the_password():
    assert SECRET not in shown(f"postgresql://tuner:{SECRET}@db-host/studies")
    with pytest.raises(ValueError) as refused:
        storage_location(f"postgres:/tuner:{SECRET}@db-host/studies", "data", "study")  # a mistyped URL
    assert "is neither a database URL" in str(refused.value) and SECRET not in str(refused.value)


def test_every_log_record_masks_credentials_in_its_message_and_traceback(tmp_path):
    """In a fresh process (the record factory is process-wide): a file handler, a message and a traceback holding the URL."""
    script = f"""
import logging, sys
from fdsml.credentials import mask_log_records
mask_log_records()
mask_log_records()  # once is enough; twice changes nothing
logging.basicConfig(filename=sys.argv[1], level=logging.INFO)
url = "postgresql://tuner:{SECRET}@db-host/studies"
logging.getLogger("fdsml").info("opening %s", url)
try:
    raise ConnectionError(f"lost {{url}}")
except ConnectionError:
    logging.getLogger("fdsml").exception("the study stopped")
"""
    log = tmp_path / "info.log"
    subprocess.run([sys.executable, "-c", script, str(log)], check=True)
    text = log.read_text()
    assert SECRET not in text
    assert "opening postgresql://tuner:***@db-host/studies" in text and "ConnectionError: lost postgresql://tuner:***@db-host" in text


def test_a_record_without_credentials_keeps_its_traceback():
    mask_log_records()
    try:
        raise KeyError("plain")
    except KeyError:
        record = logging.getLogger("fdsml").makeRecord("fdsml", logging.ERROR, "f", 1, "failed %s", ("x",), sys.exc_info())
    assert record.exc_info is not None and record.getMessage() == "failed x"
