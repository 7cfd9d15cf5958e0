"""A team's study on a real PostgreSQL server (Debian's, a throw-away cluster on 127.0.0.1 started by the
test): two workers in two project folders share it, a killed worker's trial is failed by the heartbeat
and run again by the other, a server stopped mid-study loses nothing and the study resumes, and wrong
credentials stop the run before any trial with one line. The password is found nowhere but where the
team keeps it, and a URL without it opens the storage from the password file, the environment or a
service file."""

import json
import os
import shutil
import urllib.error

import optuna
import pytest
import yaml
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from fdsml.lineage_site import build_site
from fdsml.tuning.storage import open_storage
from tests.dependencies import require_module
from tests.fresh_clone import ENV
from tests.servers import PostgresServer, get_json, viz_server
from tests.tuning.project import kedro, kedro_tune, tune_project
from tests.tuning.study_files import TINY_STUDY
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


@pytest.mark.slow  # a kedro run against the server for each wrong credential: about 15 seconds each (`make test` stays under 15 minutes; CI runs it)
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


ONE_UNIT = TINY_STUDY | {"arms": {"fdsl": {"pretrain.objective": "fdsl"}}, "seeds": {"pretrain.train.seed": [0], "retrieval.seeds": [[0]]},
                         "table": {"metrics": ["finetuned.recall@1"]}}


def _served(url: str) -> dict | None:
    """What kedro-viz serves at ``url``; None when it fails (12.5 cannot serialise some data nodes' NumPy statistics)."""
    try:
        return get_json(url)
    except urllib.error.HTTPError:
        return None


def _holding(folder, secret: str) -> list[str]:
    """Every file under ``folder`` whose bytes hold ``secret``."""
    return sorted(str(path) for path in folder.rglob("*") if path.is_file() and secret.encode() in path.read_bytes())


def _studies_holding(url: str, secret: str) -> list[str]:
    """Every study in the storage whose attributes, or whose trials' attributes and parameters, hold ``secret``."""
    storage, found = RDBStorage(url), []
    for name in optuna.get_all_study_names(storage=storage):
        study = storage.get_study_id_from_name(name)
        kept = [storage.get_study_user_attrs(study), storage.get_study_system_attrs(study)]
        kept += [[trial.user_attrs, trial.system_attrs, trial.params] for trial in storage.get_all_trials(study)]
        if secret in json.dumps(kept, default=str):
            found.append(name)
    return found


@pytest.mark.slow  # a tune, a study and a refused run, two site builds and `make viz`: about 2 minutes on 2 busy cores
def test_the_password_is_found_nowhere_under_the_project_the_site_the_viz_server_or_the_logs(postgres, tmp_path):
    tune_url, study_url = postgres.create_database("secret_tune"), postgres.create_database("secret_study")
    tune = {"storage": tune_url, "budget": {"n_trials": 1}, "baseline": False, "pruner": {"name": "none"}}
    project = tune_project(tmp_path / "project", tune=tune)  # conf/local holds the password, as docs/tuning.md once said
    (project / "conf/studies/tiny.yml").write_text(yaml.safe_dump(ONE_UNIT, sort_keys=False))
    (project / "conf/team").mkdir()
    (project / "conf/team/parameters_team.yml").write_text(yaml.safe_dump({"tune": {"storage": tune_url}}))  # an environment holding it
    said = []
    for arguments in (["--pipelines=tune"], ["--pipelines=study", f"--params=study.name=tiny,study.storage={study_url}"],
                      ["--pipelines=tune", "--params=tune.metric=pretrain.val_unseen_agreement_all"]):  # refused: another metric
        done = kedro(project, "run", *arguments)
        said.append((done.returncode, done.stdout + done.stderr))
    assert [code for code, _ in said] == [0, 0, 1], said[-1][1][-3000:]
    assert "tune.metric: study 'tiny' in 'postgresql://tuner:***@127.0.0.1" in said[2][1]
    sites = tmp_path / "sites"
    for env in ("base", "team"):  # the site's default, and an environment holding the password
        shutil.copytree(build_site(project, env), sites / env)
    team_pages = [path.read_text() for path in (sites / "team/api").rglob("*") if path.is_file()]
    assert any(f"postgresql://tuner:***@127.0.0.1:{postgres.port}/secret_tune" in page for page in team_pages)
    with viz_server(project, tmp_path / "viz.log", ENV | {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}) as url:  # `make viz`
        graphs = [get_json(f"{url}/api/pipelines/{name}") for name in ("tune", "study")]
        nodes = {node["id"]: _served(f"{url}/api/nodes/{node['id']}") for graph in graphs for node in graph["nodes"]}
    parameters = [node["id"] for graph in graphs for node in graph["nodes"] if node["type"] == "parameters"]
    assert parameters and all(nodes[node] is not None for node in parameters), "every parameters node was served"
    served = graphs + list(nodes.values())

    secret = postgres.password
    homes = (str(project / "conf/local"), str(project / "conf/team"))  # where the team keeps it
    leaks = [path for path in _holding(project, secret) + _holding(sites, secret) if not path.startswith(homes)]
    leaks += [f"the output of kedro run {index}" for index, (_, output) in enumerate(said) if secret in output]
    leaks += ["make viz's API"] if secret in json.dumps(served) else []
    leaks += [f"study {name}" for storage in (tune_url, study_url) for name in _studies_holding(storage, secret)]
    assert leaks == []
    assert (project / "info.log").is_file() and (project / ".viz").is_dir() and (project / "data/08_reporting/tune_study.md").is_file()


@pytest.mark.parametrize("way", ["PGPASSFILE", "PGPASSWORD", "PGSERVICEFILE"])
def test_a_url_without_its_password_opens_the_storage_from_the_password_file_the_environment_or_a_service_file(postgres, tmp_path, monkeypatch, way):
    postgres.create_database(f"no_password_{way.lower()}")
    database = f"no_password_{way.lower()}"
    url = f"postgresql://{postgres.user}@127.0.0.1:{postgres.port}/{database}"
    passwords = tmp_path / "pgpass"  # ~/.pgpass by default: host:port:database:user:password, mode 0600
    passwords.write_text(f"127.0.0.1:{postgres.port}:{database}:{postgres.user}:{postgres.password}\n")
    passwords.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    if way == "PGPASSFILE":
        monkeypatch.setenv("PGPASSFILE", str(passwords))
    elif way == "PGPASSWORD":
        monkeypatch.setenv("PGPASSWORD", postgres.password)
    else:
        services = tmp_path / "pg_service.conf"  # ~/.pg_service.conf by default
        services.write_text(f"[studies]\nhost=127.0.0.1\nport={postgres.port}\ndbname={database}\nuser={postgres.user}\n")
        monkeypatch.setenv("PGSERVICEFILE", str(services))
        monkeypatch.setenv("PGPASSFILE", str(passwords))
        url = "postgresql:///?service=studies"
    optuna.create_study(storage=open_storage(url), study_name="opened")
    assert optuna.get_all_study_names(storage=open_storage(url)) == ["opened"]
