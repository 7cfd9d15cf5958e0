"""Credentials never shown: the one masking of passwords in URLs, for messages, logs, lock files and pages.

A database URL may carry its password (``postgresql://tuner:PASSWORD@db-host/studies``, or
``?password=...``). Whatever shows a URL, a command line or an error shows it through :func:`masked`,
and every log record of a Kedro process is masked when it is made (:func:`mask_log_records`), so a
message that forgot still reaches no console or log file with the password in it.
"""

from __future__ import annotations

import logging
import re

MASK = "***"
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_SECRET_QUERY = re.compile(r"(?i)\b(password|passwd|pwd|sslpassword|secret|secret_access_key|token)=([^&\s'\"]+)")


def _masked_userinfo(text: str, start: int) -> str:
    """``text`` with its userinfo password hidden: from the first ``:`` at or after ``start`` to the LAST ``@`` (a
    password holding ``@`` hides whole; a path holding ``@`` hides more than needed: the safe error)."""
    at = text.rfind("@", start)
    colon = text.find(":", start, at) if at >= 0 else -1
    return f"{text[: colon + 1]}{MASK}{text[at:]}" if colon >= 0 else text


def _masked_word(word: str) -> str:
    """One blank-free word: each URL in it (to the next URL) with its password hidden; a word without ``://``
    (a mistyped URL, ``user:password@host``) hidden the same way from its first ``:``."""
    starts = [found.start() for found in _URL_START.finditer(word)]
    if not starts:
        return _masked_userinfo(word, 0)
    ends = [*starts[1:], len(word)]
    urls = [_masked_userinfo(word[start:end], word.index("://", start) + 3 - start) for start, end in zip(starts, ends)]
    return word[: starts[0]] + "".join(urls)


def masked(text: str) -> str:
    """``text`` with every URL's password, and every credential query value (``password=...``), as ``***``."""
    words = "".join(_masked_word(part) if index % 2 == 0 else part for index, part in enumerate(re.split(r"(\s+)", text)))
    return _SECRET_QUERY.sub(lambda found: f"{found.group(1)}={MASK}", words)


def mask_log_records() -> None:
    """Make every log record this process creates mask credentials, whatever logger or handler it goes to.

    A record's message is masked when created; a traceback that would show a credential is folded, masked, into
    the message (a handler would otherwise format the live exception itself). Installed once (``settings.py``)."""
    make = logging.getLogRecordFactory()
    if getattr(make, "masks_credentials", False):
        return

    def masking(*args, **kwargs) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format: logging reports that itself
            return record
        trace = logging.Formatter().formatException(record.exc_info) if record.exc_info else ""
        if masked(message) != message or masked(trace) != trace:
            record.msg, record.args = masked(message) + (f"\n{masked(trace)}" if trace else ""), None
            record.exc_info = record.exc_text = None
        return record

    masking.masks_credentials = True
    logging.setLogRecordFactory(masking)
