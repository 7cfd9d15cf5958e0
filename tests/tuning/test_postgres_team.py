"""A team's study on a real PostgreSQL server (Debian's, a throw-away cluster on 127.0.0.1 started by the
test): two workers in two project folders share it, a killed worker's trial is failed by the heartbeat
and run again by the other, a server stopped mid-study loses nothing and the study resumes, and wrong
credentials stop the run before any trial with one line."""

import optuna
import pytest
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from tests.dependencies import require_module
from tests.servers import PostgresServer
from tests.tuning.project import kedro_tune, tune_project
from tests.tuning.workers import start_workers, trial_table, two_workers_share_one_study, wait_for, worker_pid

HEARTBEAT = {"interval_s": 1, "grace_s": 4}
SLOW_TRIALS = {"train": {"max_steps": 3000, "checkpoint_every": 5}, "validation": {"every": 5}}  # killed or cut long before the end


@pytest.fixture(scope="module")
def postgres():
    require_module("psycopg", "PostgreSQL's driver is not installed: pip install -e '.[team]'")
    server = PostgresServer()
    server.start()
    yield server
    server.remove()


def _trials(storage: RDBStorage) -> list:
    """The study's trials as a fresh reader sees them (none before a worker created it)."""
    try:
        return optuna.load_study(study_name="tiny", storage=storage).get_trials()
    except KeyError:
        return []


def _tune(url: str, n_trials: int) -> dict:
    return {"storage": url, "budget": {"n_trials": n_trials}, "pruner": {"name": "none"}, "sampler": {"seed": None},
            "baseline": False, "heartbeat": HEARTBEAT}


@pytest.mark.slow  # two Kedro runs side by side and a third: about 80 s on 2 idle cores
def test_two_workers_share_one_study_on_postgresql(postgres, tmp_path):
    storage = RDBStorage(postgres.create_database("two_workers"))
    trials = two_workers_share_one_study(tmp_path, storage.url, lambda: optuna.load_study(study_name="tiny", storage=storage), n_trials=4)
    print(trial_table(trials))  # the closing note's table (pytest -s shows it)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")  # retried_trial_number
def test_a_killed_workers_trial_is_failed_by_the_heartbeat_and_run_again_by_the_other(postgres, tmp_path):
    storage = RDBStorage(postgres.create_database("killed"))
    ((doomed_pid, (_, doomed)),) = start_workers(tmp_path, ("a",), _tune(storage.url, 3), SLOW_TRIALS).items()
    mine = lambda pid: [t for t in _trials(storage) if t.user_attrs.get("worker", "").endswith(f":{pid}")]  # noqa: E731
    wait_for(lambda: any(t.intermediate_values for t in mine(doomed_pid)), 180, "worker a validated its trial once")
    ((survivor_pid, (survivor_project, survivor)),) = start_workers(tmp_path, ("b",), _tune(storage.url, 3), {"train": {"max_steps": 2}}).items()
    wait_for(lambda: bool(mine(survivor_pid)), 180, "worker b started a trial")  # b is running: only the heartbeat can tell it
    doomed.kill()
    doomed.wait()
    (killed,) = mine(doomed_pid)
    assert killed.state == TrialState.RUNNING

    assert survivor.wait(timeout=300) == 0, (survivor_project / "tune.log").read_text()[-3000:]
    trials = _trials(storage)
    print(trial_table(trials))
    assert [t.number for t in trials if t.state == TrialState.FAIL] == [killed.number]
    (rerun,) = [t for t in trials if RetryHeartbeatStaleTrialCallback.retried_trial_number(t) == killed.number]
    assert rerun.state == TrialState.COMPLETE and rerun.params == killed.params and worker_pid(rerun) == survivor_pid
    assert [t.state for t in trials].count(TrialState.COMPLETE) == 3 and {t.state for t in trials} == {TrialState.COMPLETE, TrialState.FAIL}


@pytest.mark.slow
def test_a_server_stopped_mid_study_loses_nothing_and_the_study_resumes(postgres, tmp_path):
    storage = RDBStorage(postgres.create_database("outage"))
    project = tune_project(tmp_path / "a", tune=_tune(storage.url, 3) | {"sampler": {"seed": 0}},
                           pretrain={"train": {"max_steps": 20, "checkpoint_every": 5}, "validation": {"every": 5}})
    worker = kedro_tune(project, wait=False)
    mid_study = lambda: [t.state for t in _trials(storage)][:1] == [TrialState.COMPLETE] and any(  # noqa: E731
        t.state == TrialState.RUNNING and t.intermediate_values for t in _trials(storage))
    wait_for(mid_study, 240, "trial 0 complete and trial 1 validated once")
    recorded = [t for t in _trials(storage) if t.state == TrialState.COMPLETE]
    storage.engine.dispose()  # the reader's own connections: the server's stop cuts them
    postgres.stop()
    try:
        worker.wait(timeout=180)
    finally:
        postgres.start()
    log = (project / "tune.log").read_text()
    shown = storage.url.replace(postgres.password, "***")
    assert worker.returncode == 1, log[-3000:]
    assert f"StorageLostError: tune.storage: '{shown}' stopped answering mid-study" in log and postgres.password not in log

    after = _trials(storage)
    assert [(t.number, t.params, t.value) for t in after[: len(recorded)]] == [(t.number, t.params, t.value) for t in recorded]
    resumed = kedro_tune(project)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    trials = _trials(storage)
    print(trial_table(trials))
    assert [(t.number, t.params, t.value) for t in trials[: len(recorded)]] == [(t.number, t.params, t.value) for t in recorded]
    assert [t.state for t in trials].count(TrialState.COMPLETE) == 3 and TrialState.RUNNING not in {t.state for t in trials}
    left_running = [t.number for t in after if t.state == TrialState.RUNNING]  # the cut trial: failed when the worker came back
    assert [t.number for t in trials if t.state == TrialState.FAIL] == left_running


@pytest.mark.parametrize("wrong, fault", [("password", "password authentication failed"), ("database", 'database "no_such_db" does not exist')])
def test_wrong_credentials_stop_the_run_before_any_trial_with_one_line(postgres, tmp_path, wrong, fault):
    if wrong == "password":
        url = postgres.create_database("credentials").replace(postgres.password, "not-the-password")
    else:
        url = postgres.url("no_such_db")
    project = tune_project(tmp_path / "a", tune=_tune(url, 2))
    run = kedro_tune(project)
    lines = [line for line in (run.stdout + run.stderr).splitlines() if "tune.storage" in line]
    assert run.returncode == 1 and len(lines) == 1, run.stderr[-3000:]
    assert lines[0].startswith("ConfigError: tune.storage: cannot open 'postgresql://tuner:***@127.0.0.1") and fault in lines[0]
    assert not (project / "data/06_models/tune").exists(), "no trial ran"
    if wrong == "password":
        assert optuna.get_all_study_names(storage=postgres.url("credentials")) == []
