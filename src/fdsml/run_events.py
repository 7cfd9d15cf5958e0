"""Steps that may reuse stored work say whether they did; the run summary lists what was reused.

A step calls :func:`report_step` where it decides (the codes table is up to date, a training
run is already finished): the message goes to its logger as before, and the report to every
recording started with :func:`start_recording` (the project's run-summary hook). The core
stays free of Kedro.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass


@dataclass(frozen=True)
class StepReport:
    """One step's outcome: ``what`` it is, ``where`` its result lies (a catalog name or a path)."""

    what: str
    where: str
    reused: bool
    detail: str = ""


_recordings: list[list[StepReport]] = []


def report_step(logger: logging.Logger, step: StepReport, message: str, *args) -> None:
    """Log ``message`` at INFO and hand ``step`` to every active recording."""
    logger.info(message, *args, stacklevel=2)
    for recording in _recordings:
        recording.append(step)


def start_recording() -> list[StepReport]:
    """A list that receives every step reported until :func:`stop_recording`."""
    recording: list[StepReport] = []
    _recordings.append(recording)
    return recording


def stop_recording(recording: list[StepReport]) -> None:
    """Stop handing reports to ``recording`` (a no-op when it has stopped already)."""
    _recordings[:] = [active for active in _recordings if active is not recording]
