import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fdsml.data.epoch_items as epoch_items
from fdsml.config import ConfigError
from fdsml.models import build_model, load_checkpoint, save_checkpoint
from fdsml.training.pretrain import parse_pretrain_params, pretrain

from tests.support import TINY_SPEC
from .helpers import tiny_config



def _weights(payload):
    return payload["state_dict"]


def test_pa_triplet_steps_reduce_the_loss(tiny_table, tmp_path):
    config = tiny_config(tmp_path, train={"max_steps": 25, "checkpoint_every": 100})
    payload, history = pretrain(tiny_table, TINY_SPEC, config)
    assert set(history.columns) >= {
        "step", "loss", "lr", "triplet_accuracy_same", "nonzero_fraction_same", "images_per_s", "mining_s", "triplets"
    }
    assert history["triplets"].iloc[0] == 9  # 9 anchors x C(2, 2) same-class pairs
    assert history["loss"].iloc[:5].mean() > history["loss"].iloc[-5:].mean()
    assert payload["metadata"]["filter"] == "same"


def test_same_overfits_a_handful_of_instances_of_one_class(tiny_table, tmp_path):
    """Six fixed renderings of one class: the within-class ordering must be learnable (a loss, mining or
    descriptor defect would stall the training triplet accuracy near chance). The model reads them at
    64 px: at 32 px a ResNet-18's layer4 is 1 x 1 and can start dead on these images (every embedding equal)."""
    one_class = tiny_table[tiny_table["class_id"] == 0]
    config = tiny_config(
        tmp_path,
        model={"img_size": 64},
        data={"classes_per_batch": 1, "instances_per_class": 6, "batches_per_epoch": 1},
        optimizer={"base_lr": 0.5},
        train={"max_steps": 25, "checkpoint_every": 100},
    )
    _, history = pretrain(one_class, TINY_SPEC, config)
    accuracy = history["triplet_accuracy_same"]
    assert history["triplets"].iloc[0] == 60 and accuracy.iloc[0] < 0.8  # 6 anchors x C(5, 2) pairs, from chance
    # Reached within 10 steps and held: single later steps dip by a few of the 60 triplets (0.93), the last five average >= 0.95.
    assert accuracy.iloc[:10].max() >= 0.95 and accuracy.iloc[-5:].mean() >= 0.95


def test_explicit_mode_trains_on_three_images_per_triplet(tiny_table, tmp_path):
    config = tiny_config(tmp_path, pa_triplet={"mode": "explicit", "filter": "each"}, train={"max_steps": 2})
    _, history = pretrain(tiny_table, TINY_SPEC, config)
    assert history["triplets"].tolist() == [4, 4]


def test_checkpoint_loads_into_a_model_ready_for_inference(tiny_table, tmp_path):
    payload, _ = pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path, train={"max_steps": 1}))
    save_checkpoint(tmp_path / "model.pt", payload)
    model, stored = load_checkpoint(tmp_path / "model.pt")
    assert not model.training and stored["metadata"]["objective"] == "pa_triplet"
    images = torch.rand(2, 3, 32, 32)
    reference = build_model(**payload["model"]).eval()
    reference.load_state_dict(payload["state_dict"])
    torch.testing.assert_close(model(images), reference(images))


def test_a_stale_checkpoint_from_another_configuration_is_not_resumed(tiny_table, tmp_path):
    pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path, train={"max_steps": 2}))
    other = tiny_config(tmp_path, pa_triplet={"filter": "all"}, train={"max_steps": 2})
    _, history = pretrain(tiny_table, TINY_SPEC, other)
    assert history["step"].tolist() == [1, 2]


KILLED_RUN = textwrap.dedent(
    """
    import sys
    import pandas as pd
    import torch
    torch.set_num_threads({threads})  # the parent's count: another one sums in another order, and weights drift
    from fdsml.families.finefractaldb import generate_finefractaldb
    from fdsml.training.pretrain import pretrain
    sys.path.insert(0, {tests!r})
    from support import TINY_FRACTALS, TINY_SPEC
    from training.helpers import tiny_config
    table, _ = generate_finefractaldb(TINY_FRACTALS)
    config = tiny_config({run_dir!r}, train={train!r})
    pretrain(table, TINY_SPEC, config)
    """
)
ON_A_GPU = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"))


@pytest.mark.slow  # a pre-training killed mid-run in a child process, then resumed and run again whole
@pytest.mark.parametrize("device", ["cpu", ON_A_GPU])  # benchmarks/gpu_check.py runs the CUDA case on a GPU
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(tiny_table, tmp_path, device):
    tests_dir = str(Path(__file__).resolve().parents[1])
    killed_dir = tmp_path / "killed"
    train = {"max_steps": 16, "checkpoint_every": 2, "device": device}
    script = KILLED_RUN.format(tests=tests_dir, run_dir=str(killed_dir), threads=torch.get_num_threads(), train=train)
    child = subprocess.Popen([sys.executable, "-c", script], env=os.environ | {"PYTHONPATH": "src"})
    deadline = time.monotonic() + 120
    while not list(killed_dir.glob("*/last.pt")) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    [checkpoint] = killed_dir.glob("*/last.pt")  # the run's own folder, named by its fingerprint
    killed_at = torch.load(checkpoint, weights_only=True)["step"]
    assert child.returncode == -signal.SIGKILL and killed_at < 16

    resumed, history = pretrain(tiny_table, TINY_SPEC, tiny_config(killed_dir, train=train))
    assert history["step"].tolist() == list(range(1, 17))
    uninterrupted, _ = pretrain(
        tiny_table, TINY_SPEC, tiny_config(tmp_path / "straight", train=train),
    )
    for name, tensor in _weights(uninterrupted).items():
        torch.testing.assert_close(_weights(resumed)[name], tensor, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"model": {"backbone": "resnet9000"}}, r"pretrain.model.backbone: unknown backbone 'resnet9000'; .*the closest: .*resnet50"),
        ({"pa_triplet": {"filter": "some"}}, r"pretrain.pa_triplet.filter: 'some' is not accepted; choose one of 'all', 'each', 'same', 'diff'"),
        ({"pa_triplet": {"mode": "online"}}, r"pretrain.pa_triplet.mode: 'online' is not accepted"),
        ({"objective": "arcface"}, r"pretrain.objective: 'arcface' is not accepted"),
        ({"data": {"instances_per_class": 2}}, r"pretrain.data.instances_per_class: filter 'same' needs at least 3"),
        ({"pa_triplet": {"filter": "each"}, "data": {"classes_per_batch": 1}}, r"pretrain.data.classes_per_batch: filter 'each' needs at least 2"),
        ({"train": {"max_steps": 0}}, r"pretrain.train.max_steps: must be positive"),
        ({"optimizer": {"name": "lamb"}}, r"pretrain.optimizer.name: 'lamb' is not accepted"),
        ({"trian": {}}, r"pretrain: unknown key\(s\) trian"),
        ({"objective": "fdsl_pa", "fdsl_pa": {"weight": -1}}, r"^pretrain.fdsl_pa.weight: must be >= 0"),
        ({"objective": "fdsl_pa", "fdsl_pa": {"filter": "some"}}, r"^pretrain.fdsl_pa.filter: 'some' is not accepted"),
        ({"objective": "fdsl_pa", "fdsl_pa": {"batches": "shuffled"}}, r"^pretrain.fdsl_pa.batches: plain shuffled batches .*filter 'same'"),
        ({"fdsl_pa": {"margin": -0.1}}, r"^pretrain.fdsl_pa.margin: must be >= 0"),
        ({"fdsl_pa": {"reducer": "sum"}}, r"^pretrain.fdsl_pa.reducer: 'sum' is not accepted"),
        ({"pa_triplet": {"min_relative_gap": 1.0}}, r"^pretrain.pa_triplet.min_relative_gap: must lie in \[0, 1\)"),
        ({"objective": "fdsl_pa", "data": {"instances_per_class": 2}}, r"pretrain.data.instances_per_class: filter 'same' needs at least 3"),
        ({"objective": "label_triplet", "data": {"classes_per_batch": 1}}, r"pretrain.data.classes_per_batch: filter 'each' needs at least 2"),
        ({"objective": "pml", "data": {"instances_per_class": 1}}, r"pretrain.data.instances_per_class: the pml loss needs positive pairs"),
        ({"pml": {"loss": "arcface"}}, r"^pretrain.pml.loss: unknown pair loss 'arcface'"),
        ({"pml": {"options": {"alpah": 2}}}, r"^pretrain.pml.options.alpah: the pair loss multi_similarity \(MultiSimilarityLoss\) takes no argument alpah \(did you mean alpha\?\)"),
    ],
)
def test_bad_configuration_fails_at_start_naming_the_key(params, message):
    with pytest.raises(ConfigError, match=message):
        parse_pretrain_params(params)


@pytest.mark.parametrize(
    "objective, parts",
    [
        ("fdsl_pa", {"cross_entropy", "triplet_loss", "accuracy", "triplet_accuracy_same", "nonzero_fraction_same", "triplets"}),
        ("label_triplet", {"triplet_accuracy_labels", "nonzero_fraction_labels", "triplets"}),
        ("pml", set()),
    ],
)
def test_new_objectives_pretrain_validate_and_hand_their_trunk_on(tiny_table, tmp_path, objective, parts):
    """An embedding model comes out (its checkpoint, its held-out agreement, its trunk for fine-tuning and export)."""
    from fdsml.models.export import ExportConfig, export_trunk
    from fdsml.models.starting_points import StartingPoint, build_from_start, trunk_state_dict

    from fdsml.data.holdout import HoldoutSettings, split_table

    split = split_table(tiny_table, HoldoutSettings(instance_fraction=0.2, class_fraction=0.34), seed=0)
    config = tiny_config(
        tmp_path, objective=objective, data={"classes_per_batch": 2}, train={"max_steps": 3}, validation={"every": 3, "triplets": 50}
    )
    payload, history = pretrain(tiny_table, TINY_SPEC, config, split=split)
    assert payload["model"]["head"] == "embedding" and payload["metadata"]["objective"] == objective
    assert set(history.columns) >= parts | {"loss", "val_unseen_agreement_same"}
    validated = history[history["validation_s"].notna()]
    assert validated["step"].tolist() == [0, 3] and validated["val_unseen_agreement_same"].notna().all()
    assert np.isfinite(history["loss"].dropna()).all() and len(history["loss"].dropna()) == 3
    model = build_from_start(StartingPoint("pre", checkpoint="x.pt"), seed=0, payload=payload, head="embedding", embedding_dim=8)
    for name, tensor in trunk_state_dict(payload).items():
        torch.testing.assert_close(model.backbone.state_dict()[name], tensor)
    assert export_trunk(payload, ExportConfig(), "card").trunk is not None


def test_workers_kept_across_epochs_train_the_weights_of_no_workers(tiny_table, tmp_path, monkeypatch):
    """Fresh noise over two epochs: workers started once must still render each epoch's images."""
    loaders = []

    class RecordedLoader(DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            loaders.append(self)

    monkeypatch.setattr(epoch_items, "DataLoader", RecordedLoader)
    payloads = {}
    for workers in (0, 2):
        config = tiny_config(
            tmp_path / f"workers{workers}",
            data={"fresh_noise": True},
            model={"img_size": 24},
            train={"max_steps": 4, "num_workers": workers, "checkpoint_every": 100},
        )
        payloads[workers], history = pretrain(tiny_table, TINY_SPEC, config)
        assert history["epoch"].tolist() == [0, 0, 1, 1]
    assert len(loaders) == 2 and loaders[1].persistent_workers  # one loader, its workers kept, for both epochs
    for name, value in _weights(payloads[0]).items():
        assert torch.equal(value, _weights(payloads[2])[name]), name
