"""Pre-training run folders: one per fingerprint under run_dir, never overwritten by another run; listed and pruned."""

import logging

from click.testing import CliRunner

from fdsml.cli import cli
from fdsml.training.pretrain import pretrain
from fdsml.training.run_folders import list_runs, remove_runs
from tests.support import TINY_SPEC
from tests.training.helpers import tiny_config


def test_a_changed_setting_trains_beside_the_old_run_and_going_back_resumes_it(tiny_table, tmp_path, caplog):
    first = tiny_config(tmp_path, train={"max_steps": 2})
    pretrain(tiny_table, TINY_SPEC, first)
    [old] = list_runs(tmp_path)
    stored = (old.path / "last.pt").read_bytes()

    _, history = pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path, pa_triplet={"filter": "each"}, train={"max_steps": 2}))
    assert history["step"].tolist() == [1, 2]  # a run of its own, from the start
    assert len(list_runs(tmp_path)) == 2 and (old.path / "last.pt").read_bytes() == stored

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fdsml.training.loop"):
        _, history = pretrain(tiny_table, TINY_SPEC, first)
    said = [record.getMessage() for record in caplog.records if record.name == "fdsml.training.loop"]
    assert said[0].startswith("Training on cpu (trunk float32, head float32, loss float32), world size 1: 2 steps")  # first: where and how it trains
    assert said[1] == f"Resuming from {old.path / 'last.pt'} at step 2 of 2"
    assert history["step"].tolist() == [1, 2]


def test_old_runs_are_listed_and_removed(tiny_table, tmp_path):
    for steps in (1, 2):
        pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path, train={"max_steps": steps}))
    newest, oldest = list_runs(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(cli, ["runs", "list", "--run-dir", str(tmp_path)])
    assert listed.exit_code == 0 and listed.output.index(newest.path.name) < listed.output.index(oldest.path.name)
    removed = runner.invoke(cli, ["runs", "remove", "--run-dir", str(tmp_path), "--keep", "1"])
    assert removed.exit_code == 0 and f"removed {oldest.path}" in removed.output
    assert [run.path for run in list_runs(tmp_path)] == [newest.path]
    refused = runner.invoke(cli, ["runs", "remove", "--run-dir", str(tmp_path), "0123456789abcdef"])
    assert refused.exit_code != 0 and "no run folder 0123456789abcdef" in refused.output
    assert remove_runs(tmp_path, names=(newest.path.name,)) and list_runs(tmp_path) == []
