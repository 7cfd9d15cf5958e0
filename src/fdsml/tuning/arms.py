"""A fixed set of arms (a study's configurations), each run once, as the trials of an Optuna study.

The studies (conf/studies, docs/studies.md) run a known list of arms rather than a search. Each arm is
a trial whose user attributes are ``arm`` (its name) and ``fingerprint`` (the digest of everything
that defines its result: its configuration and the code computing it). Optuna's trial states are
the reuse rule: an arm with a COMPLETE trial of the same fingerprint is never rerun; a FAILed one
(an exception, a worker killed on this host: :func:`~fdsml.tuning.storage.fail_trials_of_dead_workers`)
runs again, and so does one whose fingerprint changed. The arm's result is the trial's value and
its ``result`` user attribute, from which the study draws its table (:func:`arm_results`).

Several workers (``jobs`` processes, or processes on several machines sharing one RDB or journal
storage) share the list. A worker claims an arm by creating its RUNNING trial, attributes and all,
in one write; it keeps the arm only when its trial is the lowest-numbered live claim on it, so two
workers claiming at the same instant run the arm once (the later one yields, its trial PRUNED).
Workers that start together contend for a SQLite file: a write that finds it locked past SQLite's own
wait is tried again (:func:`_patiently`), so that a worker never stops for it while its peers go on alone.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import optuna
import pandas as pd
import sqlalchemy.exc
from optuna.trial import TrialState

from fdsml.tuning.storage import database_fault, fail_trials_of_dead_workers, open_storage, storage_location, worker_name

logger = logging.getLogger(__name__)
STUDIES_DIR = "data/07_model_output/studies"
LIVE = (TrialState.COMPLETE, TrialState.RUNNING)

LOCKED_RETRIES_S = (1, 2, 4, 8, 16, 32)
"""The seconds between tries of a storage call that found a SQLite file locked (each try waits SQLite's 5 s first)."""

ArmRun = Callable[[str], tuple[float, dict]]
"""Runs the named arm; its value (the study's headline number) and its result (JSON: every number its table shows)."""


def _patiently(call: Callable[[], Any]) -> Any:
    """``call()``, tried again while it finds a SQLite file locked: workers started together contend for it, and the
    one that lost would stop with "database is locked" while the others went on alone (Optuna's SQLite storage documents the limit)."""
    for wait in (*LOCKED_RETRIES_S, None):
        try:
            return call()
        except Exception as error:
            if wait is None or not _locked(error):
                raise
            logger.warning("The study's SQLite file is locked by another worker: trying again in %d s", wait)
            time.sleep(wait)


def _locked(error: BaseException) -> bool:
    """Whether the database error in ``error``'s chain is SQLite's "database is locked" (Optuna wraps a failed commit's)."""
    found = database_fault(error)
    return isinstance(found, sqlalchemy.exc.OperationalError) and "database is locked" in str(found)


def open_arms_study(name: str, storage: str | None = None, storage_dir: str = STUDIES_DIR) -> optuna.Study:
    """The study ``name`` in ``storage`` (None: ``<storage_dir>/<name>.db``), created when new.

    Loaded before any create: a journal file records every create, even one that finds the study, and a committed
    journal (a study file's ``storage``) would grow a line each time its page is drawn."""
    location = storage_location(storage, storage_dir, name)

    def opened() -> optuna.Study:
        found = open_storage(location)
        if name in {summary.study_name for summary in found.get_all_studies()}:
            return optuna.load_study(storage=found, study_name=name)
        return optuna.create_study(storage=found, study_name=name, direction="maximize", load_if_exists=True)

    return _patiently(opened)


def _claims(study: optuna.Study, arm: str, fingerprint: str, states=LIVE) -> list[optuna.trial.FrozenTrial]:
    return [
        trial
        for trial in study.get_trials(deepcopy=False, states=states)
        if trial.user_attrs.get("arm") == arm and trial.user_attrs.get("fingerprint") == fingerprint
    ]


def _claim(study: optuna.Study, arm: str, fingerprint: str) -> int | None:
    """Create this worker's RUNNING trial for ``arm``; its number, or None when another worker holds (or finished) the arm.
    Tried again after a locked file (:func:`_patiently`), it finds the trial an earlier try added rather than adding one more."""
    attrs = {"arm": arm, "fingerprint": fingerprint, "worker": worker_name()}
    claims = _claims(study, arm, fingerprint)
    if not any(trial.user_attrs == attrs and trial.state == TrialState.RUNNING for trial in claims):
        if claims:
            return None
        study.add_trial(
            optuna.trial.FrozenTrial(
                number=-1, state=TrialState.RUNNING, value=None, datetime_start=datetime.now(), datetime_complete=None,
                params={}, distributions={}, user_attrs=attrs, system_attrs={}, intermediate_values={}, trial_id=-1,
            )
        )
        claims = _claims(study, arm, fingerprint)
    number = max(trial.number for trial in claims if trial.user_attrs == attrs and trial.state == TrialState.RUNNING)
    if min(trial.number for trial in claims) != number:
        study.tell(number, state=TrialState.PRUNED)  # another worker claimed it first: never counted
        return None
    return number


def _run_claimed(study: optuna.Study, number: int, arm: str, run: ArmRun) -> bool:
    """Run the claimed arm; True when it completed (its trial COMPLETE with its result), False when it raised (FAIL)."""
    try:
        value, result = run(arm)
    except Exception:
        logger.exception("Arm %s failed: its trial %d is marked FAIL and the next run reruns it", arm, number)
        _patiently(lambda: study.tell(number, state=TrialState.FAIL))
        return False
    except BaseException:  # interrupted: fail the trial so the next run reruns the arm
        _patiently(lambda: study.tell(number, state=TrialState.FAIL))
        raise
    _patiently(lambda: _record(study, number, float(value), result))
    return True


def _record(study: optuna.Study, number: int, value: float, result: dict) -> None:
    """Trial ``number`` COMPLETE with ``value`` and its ``result``."""
    trial_id = study.get_trials(deepcopy=False)[number]._trial_id
    optuna.trial.Trial(study, trial_id).set_user_attr("result", result)
    study.tell(number, value)


def work(study: optuna.Study, arms: Mapping[str, str], run: ArmRun) -> list[str]:
    """Claim and run, one after another, the arms no worker holds or has finished; the arms that failed."""
    failed_dead = _patiently(lambda: fail_trials_of_dead_workers(study))
    if failed_dead:
        logger.warning("Arms of study %s left running by a worker that ended were marked failed: trials %s", study.study_name, failed_dead)
    failed = []
    for arm, fingerprint in arms.items():
        number = _patiently(lambda: _claim(study, arm, fingerprint))
        if number is not None and not _run_claimed(study, number, arm, run):
            failed.append(arm)
    return failed


def _worker(task: tuple[str, str | None, str, dict[str, str], ArmRun, str | None]) -> list[str]:
    name, storage, storage_dir, arms, run, device = task
    if device is not None:  # a spawned process that has not touched CUDA yet: it sees this GPU alone
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    try:
        return work(open_arms_study(name, storage, storage_dir), arms, run)
    except Exception:  # said now: the run raises it only when every other worker has finished, hours later perhaps
        logger.exception("A worker of study %s stopped: the others go on without it, and the next run reruns its arms", name)
        raise


def run_arms(
    name: str,
    arms: Mapping[str, str],
    run: ArmRun,
    jobs: int = 1,
    storage: str | None = None,
    storage_dir: str = STUDIES_DIR,
    devices: Sequence[str] = (),
) -> list[str]:
    """Run every arm (name: fingerprint) of study ``name`` not yet COMPLETE, ``jobs`` at a time (worker k on GPU
    ``devices[k]`` when given); the arms that failed.

    ``run`` must be picklable when ``jobs`` > 1 (a module-level function, or a ``functools.partial`` of one).
    """
    if jobs <= 1 and not devices:
        return work(open_arms_study(name, storage, storage_dir), arms, run)
    open_arms_study(name, storage, storage_dir)  # created once, before the workers race to create it
    tasks = [(name, storage, storage_dir, dict(arms), run, devices[k] if devices else None) for k in range(jobs)]
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=1) as pool:
        return sorted({arm for failed in pool.map(_worker, tasks, chunksize=1) for arm in failed})


def arm_results(study: optuna.Study, arms: Mapping[str, str]) -> pd.DataFrame:
    """The COMPLETE trial of each arm (name: fingerprint) with its current fingerprint: arm, number, value, result, worker, seconds."""
    rows = []
    for arm, fingerprint in arms.items():
        for trial in _claims(study, arm, fingerprint, states=(TrialState.COMPLETE,))[:1]:
            rows.append(
                {
                    "arm": arm,
                    "number": trial.number,
                    "value": trial.value,
                    "result": trial.user_attrs["result"],
                    "worker": trial.user_attrs.get("worker"),
                    "seconds": (trial.datetime_complete - trial.datetime_start).total_seconds(),
                }
            )
    return pd.DataFrame(rows, columns=["arm", "number", "value", "result", "worker", "seconds"])
