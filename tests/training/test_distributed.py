"""Two gloo replicas on the CPU: identical weights, one resume decision for nodes with separate run
folders, a refused world-size change, per-replica random draws, SyncBatchNorm as an option."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from fdsml.config import ConfigError
from fdsml.models import build_model
from fdsml.distributed import DistContext
from fdsml.training.model_setup import synchronised_batchnorm
from fdsml.training.loop_config import LoopConfig
from fdsml.training.pretrain import pretrain

from tests.support import ROOT, TINY_SPEC
from tests.servers import free_port
from .ddp_worker import draw_per_replica
from .helpers import tiny_config



def _checkpoints(run_dir: Path) -> list[Path]:
    """The runs' checkpoints under ``run_dir`` (one folder per run fingerprint)."""
    return sorted(run_dir.glob("*/last.pt"))


def _start_nodes(folder: Path, port: int) -> list[subprocess.Popen]:
    """Two replicas as two "nodes": separate processes, each with its own run folder ``node<rank>``."""
    env = os.environ | {"PYTHONPATH": str(ROOT / "src")}
    threads = str(torch.get_num_threads())
    return [
        subprocess.Popen(
            [sys.executable, "-m", "tests.training.ddp_worker", str(rank), "2", str(port),
             str(folder / f"node{rank}"), str(folder / f"result{rank}.pt"), threads],
            cwd=ROOT, env=env,
        )
        for rank in range(2)
    ]


def _finish(nodes: list[subprocess.Popen]) -> None:
    try:
        codes = [node.wait(timeout=240) for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:  # a replica left waiting in a collective: the replicas diverged
                node.kill()
    assert codes == [0, 0]


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
    """An uninterrupted 2-replica run."""
    straight = tmp_path_factory.mktemp("straight")
    _finish(_start_nodes(straight, free_port()))
    return straight


@pytest.fixture(scope="module")
def two_node_runs(straight_run, tmp_path_factory):
    """The uninterrupted run, and one killed after a checkpoint and started again."""
    straight, killed = straight_run, tmp_path_factory.mktemp("killed")
    nodes = _start_nodes(killed, free_port())
    deadline = time.monotonic() + 120
    while not _checkpoints(killed / "node0") and all(node.poll() is None for node in nodes) and time.monotonic() < deadline:
        time.sleep(0.02)
    for node in nodes:
        node.send_signal(signal.SIGKILL)
    killed_at = torch.load(_checkpoints(killed / "node0")[0], weights_only=True)["step"]
    assert [node.wait() for node in nodes] == [-signal.SIGKILL] * 2 and killed_at < 6
    _finish(_start_nodes(killed, free_port()))
    return straight, killed


@pytest.mark.slow  # two gloo replicas pre-train, and one process for the reference
def test_two_gloo_replicas_end_with_identical_weights(straight_run):
    straight = straight_run
    first, second = (torch.load(straight / f"result{rank}.pt", weights_only=True) for rank in range(2))
    assert first["loss"] == second["loss"]  # the logged loss is the mean over replicas
    for name, tensor in first["state_dict"].items():
        torch.testing.assert_close(second["state_dict"][name], tensor, rtol=0, atol=0, msg=name)
    assert len(_checkpoints(straight / "node0")) == 1 and not _checkpoints(straight / "node1")  # rank 0 writes


@pytest.mark.slow  # two nodes of gloo replicas, killed and resumed
def test_nodes_with_separate_run_folders_resume_to_the_weights_of_an_uninterrupted_run(two_node_runs):
    straight, killed = two_node_runs
    assert not _checkpoints(killed / "node1")  # node 1 never had a checkpoint of its own
    reference = torch.load(straight / "result0.pt", weights_only=True)["state_dict"]
    for rank in range(2):
        resumed = torch.load(killed / f"result{rank}.pt", weights_only=True)
        assert resumed["steps"] == list(range(1, 7))
        for name, tensor in reference.items():
            torch.testing.assert_close(resumed["state_dict"][name], tensor, rtol=0, atol=0, msg=f"rank {rank}: {name}")


@pytest.mark.slow  # shares the two nodes' runs
def test_a_run_at_another_world_size_starts_its_own_folder_and_keeps_the_other(two_node_runs, tiny_table, tmp_path):
    """The world size is part of the run's fingerprint: one process does not resume (or overwrite) a
    2-process run's checkpoint, it trains in a folder of its own beside it."""
    run_dir = tmp_path / "run"
    shutil.copytree(two_node_runs[1] / "node0", run_dir)
    (two_process,) = _checkpoints(run_dir)
    kept = two_process.read_bytes()
    _, history = pretrain(tiny_table, TINY_SPEC, tiny_config(run_dir, train={"max_steps": 1}))
    assert history["step"].tolist() == [1]
    assert len(_checkpoints(run_dir)) == 2 and two_process.read_bytes() == kept


@pytest.mark.slow  # two gloo replicas pre-train
def test_replicas_draw_their_own_dropout_masks_and_mixing(tiny_table, tmp_path):
    mp.spawn(draw_per_replica, args=(2, free_port(), str(tmp_path), tiny_table, TINY_SPEC), nprocs=2, join=True)
    first, second = (torch.load(tmp_path / f"draws{rank}.pt", weights_only=True) for rank in range(2))
    assert len(first["masks"]) == 2 and all(a != b for a, b in zip(first["masks"], second["masks"]))
    assert first["masks"][0] != first["masks"][1]  # and per step
    assert first["mixup"] != second["mixup"]


def test_sync_batchnorm_converts_every_batchnorm_under_ddp_on_cuda_only():
    model = build_model("resnet18", head="embedding", embedding_dim=8)
    keys = set(model.state_dict())
    on = LoopConfig(sync_batchnorm=True)
    replicas = DistContext(torch.device("cuda", 0), rank=0, world_size=2)
    converted = synchronised_batchnorm(model, on, replicas)
    assert any(isinstance(m, torch.nn.SyncBatchNorm) for m in converted.modules())
    assert not any(type(m) is torch.nn.BatchNorm2d for m in converted.modules()) and set(converted.state_dict()) == keys
    single = build_model("resnet18", head="embedding", embedding_dim=8)
    assert synchronised_batchnorm(single, on, DistContext(torch.device("cuda", 0))) is single  # one process: nothing to sync
    with pytest.raises(ConfigError, match="train.sync_batchnorm: .*CUDA devices only"):
        synchronised_batchnorm(single, on, DistContext(torch.device("cpu"), rank=0, world_size=2))
