"""Live metrics: dvclive's files grow while a pre-training runs, and a killed, resumed run leaves one row per step."""

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from fdsml.training.live import LiveMetrics
from fdsml.training.pretrain import pretrain

from tests.support import TINY_SPEC
from .helpers import tiny_config

STEPS, CHECKPOINT_EVERY = 16, 4

LIVE_RUN = textwrap.dedent(
    """
    import sys
    import torch
    torch.set_num_threads({threads})
    from fdsml.families.finefractaldb import generate_finefractaldb
    from fdsml.training.pretrain import pretrain
    sys.path.insert(0, {tests!r})
    from support import TINY_FRACTALS, TINY_SPEC
    from training.helpers import tiny_config
    table, _ = generate_finefractaldb(TINY_FRACTALS)
    pretrain(table, TINY_SPEC, tiny_config({run_dir!r}, train={train!r}, live_dir={run_dir!r} + "/live"))
    """
)
TRAIN = {"max_steps": STEPS, "checkpoint_every": CHECKPOINT_EVERY, "log_every": 1}
LIVE = "live"


def steps_in(tsv: Path) -> list[int]:
    if not tsv.exists():
        return []
    with open(tsv, newline="") as handle:
        return [int(row["step"]) for row in csv.DictReader(handle, delimiter="\t")]


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    """A pre-training in a child process, watched from this process and killed past a checkpoint.

    Returns the run folder, the child's exit code and the row counts of ``loss.tsv`` this process
    read while the child ran.
    """
    run_dir = tmp_path_factory.mktemp("live") / "run"
    script = LIVE_RUN.format(
        tests=str(Path(__file__).resolve().parents[1]), run_dir=str(run_dir), train=TRAIN, threads=torch.get_num_threads()
    )
    child = subprocess.Popen([sys.executable, "-c", script], env=os.environ | {"PYTHONPATH": "src"})
    loss = run_dir / LIVE / "plots" / "metrics" / "loss.tsv"
    seen, deadline = [], time.monotonic() + 180
    try:
        # past the first checkpoint, on a step the next checkpoint has not saved: the resumed run trains it again
        while child.poll() is None and time.monotonic() < deadline:
            steps = steps_in(loss)
            if not seen or len(steps) != seen[-1]:
                seen.append(len(steps))
            if len(steps) > CHECKPOINT_EVERY and len(steps) % CHECKPOINT_EVERY:
                break
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return run_dir, child.returncode, seen


@pytest.mark.slow
def test_the_live_files_gain_rows_while_the_run_runs(killed_run):
    run_dir, returncode, seen = killed_run
    growing = [count for count in seen if count]
    assert returncode == -signal.SIGKILL  # read before the run ended
    assert len(growing) >= 2 and growing == sorted(growing), seen
    summary = json.loads((run_dir / LIVE / "metrics.json").read_text())
    assert summary["step"] < STEPS and {"loss", "lr", "images_per_s"} <= set(summary)


@pytest.mark.slow
def test_a_killed_and_resumed_run_has_one_live_row_per_step(killed_run, tiny_table):
    run_dir, _, _ = killed_run
    metrics = run_dir / LIVE / "plots" / "metrics"
    (checkpoint,) = run_dir.glob("*/last.pt")  # the run's folder is named by its fingerprint
    checkpointed = torch.load(checkpoint, weights_only=True)["step"]
    assert max(steps_in(metrics / "loss.tsv")) > checkpointed  # rows the resumed run trains again

    _, history = pretrain(tiny_table, TINY_SPEC, tiny_config(run_dir, train=TRAIN, live_dir=str(run_dir / LIVE)))

    for tsv in metrics.glob("*.tsv"):
        assert steps_in(tsv) == list(range(1, STEPS + 1)), tsv.name
    with open(metrics / "loss.tsv", newline="") as handle:
        logged = [float(row["loss"]) for row in csv.DictReader(handle, delimiter="\t")]
    assert logged == history["loss"].tolist()  # the same rows as the catalog's history


def test_every_numeric_column_of_a_row_is_logged_and_final_metrics_reach_the_summary_only(tmp_path):
    live = LiveMetrics(tmp_path / LIVE, {"train": {"max_steps": 2}})
    run = live.run("cub_seed0/")
    run([{"step": 1, "loss": 0.5, "triplet_accuracy": 0.25, "start": "imagenet"}, {"step": 2, "loss": 0.4}])
    live.final({"recall_at_1": 0.75}, "cub_seed0/")

    metrics = tmp_path / LIVE / "plots" / "metrics" / "cub_seed0"
    assert sorted(p.name for p in metrics.iterdir()) == ["loss.tsv", "triplet_accuracy.tsv"]
    assert steps_in(metrics / "loss.tsv") == [1, 2] and steps_in(metrics / "triplet_accuracy.tsv") == [1]
    summary = json.loads((tmp_path / LIVE / "metrics.json").read_text())
    assert summary == {"cub_seed0": {"loss": 0.4, "triplet_accuracy": 0.25, "recall_at_1": 0.75}, "step": 2}
    assert "max_steps: 2" in (tmp_path / LIVE / "params.yaml").read_text()
