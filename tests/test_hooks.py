"""The project hooks' decisions, on a toy registry and catalog: which pipelines to name first, what the summary says,
which DVC remotes are named for not verifying what they pull."""

from __future__ import annotations

import logging
import os
import subprocess

import pytest
from kedro.io import DataCatalog
from kedro.pipeline import Node, Pipeline

from fdsml.hooks import missing_inputs, summarise_run, warn_of_unverified_remotes, writers_of
from fdsml.run_events import StepReport
from tests.fresh_clone import BIN


def _copy(x):
    return x


def _pipe(*edges):
    return Pipeline([Node(_copy, source, target, name=f"make_{target}") for source, target in edges])


REGISTRY = {
    "report": _pipe(("table", "report")),
    "train": _pipe(("codes", "model")),
    "codes": _pipe(("params:seed", "codes")),
    "table": _pipe(("model", "table")),
    "everything": _pipe(("params:seed", "codes"), ("codes", "model"), ("model", "table"), ("table", "report")),
}


@pytest.fixture
def catalog(tmp_path):
    entries = {name: {"type": "pickle.PickleDataset", "filepath": str(tmp_path / f"{name}.pkl")} for name in ("codes", "model", "table", "report")}
    return DataCatalog.from_config(entries)


def test_the_writers_of_a_missing_input_include_what_they_need_in_turn_in_data_flow_order(catalog, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    files = {name: f"{name}.pkl" for name in ("codes", "model", "table", "report")}
    assert missing_inputs(REGISTRY["report"], catalog, files) == ["table"]
    assert writers_of(["table"], catalog, files, REGISTRY) == ["codes", "train", "table"]
    catalog.save("model", 1)
    assert writers_of(["table"], catalog, files, REGISTRY) == ["table"]


def test_a_run_that_reused_every_step_says_nothing_needed_doing_and_what_to_delete(catalog, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    steps = [StepReport("codes table", "codes", reused=True, detail="3 classes"), StepReport("training run", "runs/a", reused=True)]
    text = summarise_run(REGISTRY["train"], catalog, steps)
    assert "  model.pkl" in text.splitlines()
    assert "Reused the codes table codes.pkl (3 classes)" in text
    assert "Nothing needed doing. To redo it, delete what was reused: rm -r codes.pkl runs/a" in text
    worked = summarise_run(REGISTRY["train"], catalog, [steps[0], StepReport("training run", "runs/a", reused=False)])
    assert "Nothing needed doing" not in worked and "Reused the codes table" in worked


def test_a_dvc_remote_that_does_not_verify_what_it_pulls_is_named_in_a_warning(tmp_path, caplog):
    dvc = [str(BIN / "dvc")]
    for command in (["init", "--no-scm", "-q"], ["remote", "add", "team", "ssh://store/srv/fdsml"], ["remote", "add", "mirror", "/mnt/mirror"],
                    ["remote", "modify", "mirror", "verify", "true"]):
        subprocess.run(dvc + command, cwd=tmp_path, check=True, env=os.environ | {"DVC_NO_ANALYTICS": "1"})
    with caplog.at_level(logging.WARNING, logger="fdsml.hooks"):
        warn_of_unverified_remotes(tmp_path)
    assert [record.getMessage() for record in caplog.records] == [
        "DVC remote 'team' does not verify what it pulls: a file swapped on it would be used as is; "
        "`dvc remote modify team verify true` (docs/teams.md#security)"
    ]
    caplog.clear()
    subprocess.run(dvc + ["remote", "modify", "--local", "team", "verify", "true"], cwd=tmp_path, check=True)  # one person's own setting counts too
    warn_of_unverified_remotes(tmp_path)
    assert not caplog.records
