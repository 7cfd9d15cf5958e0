"""``conf/paper``, scaled down, under ``torchrun --nproc_per_node=2``: every switch the published
configuration turns on runs in two gloo processes, through ``kedro run`` as a user types it.

The run's configuration is ``conf/paper`` itself with :data:`SCALE_DOWN` applied, so a switch added
to ``conf/paper`` runs here as published. :func:`test_the_scale_down_keeps_every_switch_of_conf_paper`
holds :data:`SCALE_DOWN` to what it may change: a number to a smaller one (a size, a count, a
duration), or a declared stand-in (:data:`STAND_INS`: real datasets this machine does not have, a
smaller trunk of the same family); a switch turned off or changed fails it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from fdsml.config import with_overlay

from ..fresh_clone import ENV, ROOT, fresh_clone

PAPER = ROOT / "conf" / "paper"
DIGITS_STARTS = [
    {"name": "scratch", "backbone": "resnet18"},
    {"name": "fdsml", "checkpoint": "pretrained_model", "backbone": "resnet18"},
]
SCALE_DOWN = {
    "fractals.n_classes": 4,
    "fractals.instances_per_class": 8,
    "fractals.render.size": 32,
    "fractals.render.points": 800,
    "fractals.class_filter.size": 128,  # not in conf/paper: the search's rendering
    "fractals.class_filter.points": 8000,
    "pretrain.model.backbone": "resnet18",
    "pretrain.model.embedding_dim": 16,
    "pretrain.model.img_size": 32,
    "pretrain.data.classes_per_batch": 3,
    "pretrain.data.instances_per_class": 3,
    "pretrain.data.triplets_per_batch": 4,
    "pretrain.train.epochs": 3,
    "pretrain.train.num_workers": 1,
    "pretrain.train.log_every": 1,
    "pretrain.train.checkpoint_every": 2,
    "pretrain.validation.every": 2,
    "pretrain.validation.batch_size": 64,
    "pretrain.validation.probe.dataset": "digits",
    "pretrain.validation.probe.root": None,
    "pretrain.validation.probe.image_size": 32,
    "pretrain.validation.probe.max_images": 40,
    "retrieval.starts": DIGITS_STARTS,
    "retrieval.seeds": [0],
    "retrieval.data.dataset": "digits",
    "retrieval.data.root": None,
    "retrieval.data.image_size": 32,
    "retrieval.data.batch_size": 8,
    "retrieval.data.eval_batch_size": 64,
    "retrieval.data.eval_workers": 1,
    "retrieval.train.max_steps": 3,  # not in conf/paper: epochs stays 80, the run stops after 3 steps
    "retrieval.train.freeze_backbone_steps": 1,
    "retrieval.train.num_workers": 1,
    "retrieval.train.log_every": 1,
    "retrieval.train.checkpoint_every": 2,
    "classification.datasets": [{"name": "digits", "root": None}],
    "classification.starting_points": [{**start, "checkpoint": start.get("checkpoint")} for start in DIGITS_STARTS],
    "classification.image_size": 32,
    "classification.batch_size": 8,
    "classification.eval_batch_size": 64,
    "classification.eval_workers": 1,
    "classification.train.max_steps": 3,
    "classification.train.num_workers": 1,
    "classification.train.log_every": 1,
    "classification.train.checkpoint_every": 2,
}
STAND_INS = {  # keys SCALE_DOWN changes other than by shrinking a number, and why
    "pretrain.model.backbone": "ResNet-18 for ResNet-50: the same timm ResNet code path, small enough for a CPU",
    "pretrain.validation.probe.dataset": "digits for CUB: CUB is not on this machine; the same retrieval reader path",
    "pretrain.validation.probe.root": "digits ships with scikit-learn",
    "retrieval.starts": "both starting points kept (scratch and the pre-trained checkpoint), on ResNet-18",
    "retrieval.seeds": "one seed of the three: seeds repeat the same run",
    "retrieval.data.dataset": "digits for CUB (not on this machine)",
    "retrieval.data.root": "digits ships with scikit-learn",
    "classification.datasets": "digits for the seven benchmarks (none on this machine); the same reader registry",
    "classification.starting_points": "both starting points kept (scratch and the pre-trained checkpoint), on ResNet-18",
}
PIPELINES = "pretrain,retrieval,classification"
LIMIT_S = 1500


def leaves(tree: dict, prefix: str = "") -> dict:
    """``tree``'s leaves by dotted key (a list is one leaf)."""
    found = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            found |= leaves(value, f"{prefix}{key}.")
        else:
            found[f"{prefix}{key}"] = value
    return found


def paper_parameters() -> dict:
    merged = {}
    for path in sorted(PAPER.glob("parameters*.yml")):
        merged |= yaml.safe_load(path.read_text()) or {}
    return merged


def scaled_paper() -> dict:
    """``conf/paper``'s parameters with :data:`SCALE_DOWN` applied."""
    return with_overlay(paper_parameters(), SCALE_DOWN)


def test_the_scale_down_keeps_every_switch_of_conf_paper():
    paper, base = leaves(paper_parameters()), {}
    for path in (ROOT / "conf" / "base").glob("parameters*.yml"):
        base |= leaves(yaml.safe_load(path.read_text()) or {})
    for key, value in SCALE_DOWN.items():
        assert key in paper or key in base or key.endswith(".max_steps"), f"{key}: neither conf/paper nor conf/base has it"
        published = paper.get(key, base.get(key))
        if key in STAND_INS:
            continue
        shrinks = isinstance(published, (int, float)) and not isinstance(published, bool) and isinstance(value, type(published))
        assert shrinks and 0 < value <= published or published is None, (
            f"{key}: the scale-down sets {value!r} where conf/paper has {published!r}; only smaller numbers keep the "
            "switches as published: declare a stand-in in STAND_INS with its reason, or run the published value"
        )
    ran = leaves(scaled_paper())
    for key, value in paper.items():
        assert key in ran, f"{key}: conf/paper sets it and the torchrun test does not run it"


def _torchrun(clone: Path, pipelines: str) -> subprocess.Popen:
    command = ["torchrun", "--standalone", "--nproc_per_node=2", "-m", "kedro", "run", f"--pipelines={pipelines}", "--env=paper_cpu"]
    return subprocess.Popen(command, cwd=clone, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(launcher: subprocess.Popen) -> str:
    try:
        output, _ = launcher.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        launcher.terminate()  # torchrun stops its replicas
        output, _ = launcher.communicate(timeout=60)
        raise AssertionError(f"torchrun did not finish in {LIMIT_S} s:\n{output[-6000:]}") from None
    assert launcher.returncode == 0, output[-6000:]
    return output


def _clone(folder: Path) -> Path:
    clone = fresh_clone(folder)
    env = clone / "conf" / "paper_cpu"
    env.mkdir()
    for name, tree in scaled_paper().items():
        (env / f"parameters_{name}.yml").write_text(yaml.safe_dump({name: tree}))
    return clone


@pytest.mark.slow
def test_conf_paper_scaled_down_runs_under_torchrun_and_resumes_exactly(tmp_path):
    straight, killed = _clone(tmp_path / "straight"), _clone(tmp_path / "killed")
    interrupted = _torchrun(killed, "pretrain")
    deadline = time.monotonic() + LIMIT_S
    while not list((killed / "data/06_models").rglob("last.pt")) and interrupted.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    interrupted.send_signal(signal.SIGTERM)  # torchrun ends both replicas mid-run
    interrupted.communicate(timeout=120)
    assert interrupted.returncode != 0, "the run finished before it could be interrupted"
    resumed_run = _torchrun(killed, "pretrain")
    output = _finish(_torchrun(straight, PIPELINES))
    _finish(resumed_run)
    assert "Traceback" not in output

    history = pd.read_csv(straight / "data/08_reporting/pretrain_history.csv")
    validated = history[history["validation_s"].notna()]
    assert len(validated) >= 2 and validated["val_probe_recall_at_1"].notna().all()
    retrieval = yaml.safe_load((straight / "data/08_reporting/retrieval_metrics.json").read_text())
    classification = yaml.safe_load((straight / "data/08_reporting/classification_metrics.json").read_text())
    assert retrieval and classification
    reference, resumed = (
        torch.load(clone / "data/06_models/pretrained_model.pt", weights_only=True)["state_dict"] for clone in (straight, killed)
    )
    for name, tensor in reference.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0, msg=name)
