"""What stops a run early with a clear message: a diverged loss (the last good checkpoint stays), more
replicas than GPUs on a machine; and what a single process on a machine of several GPUs is told."""

import logging
import os

import pytest
import torch

from fdsml.config import ConfigError
from fdsml.errors import DivergedError
from fdsml import distributed
from fdsml.training.loop import configure_cuda, train
from fdsml.training.pretrain import build_batch_sampler, build_fractal_dataset, build_pretrain_model, plan_pretrain

from tests.support import TINY_SPEC
from .helpers import tiny_config


class DivergingFrom(torch.nn.Module):
    """A loss that turns NaN from step ``first`` (1-based) on."""

    def __init__(self, first: int):
        super().__init__()
        self.first = first

    def forward(self, model, batch, step=0):
        loss = model(batch["image"]).pow(2).mean()
        return (loss * float("nan") if step + 1 >= self.first else loss), {}

    def param_groups(self):
        return []


def test_a_non_finite_loss_stops_the_run_naming_the_step_and_keeps_the_last_good_checkpoint(tiny_table, tmp_path):
    config = tiny_config(tmp_path / "run", train={"max_steps": 6, "checkpoint_every": 2, "log_every": 1})
    context = distributed.setup("cpu")
    plan = plan_pretrain(config, len(tiny_table), 1).check()
    dataset = build_fractal_dataset(tiny_table, TINY_SPEC, config, None)
    sampler = build_batch_sampler(dataset.labels, config, context, plan)
    model = build_pretrain_model(config, 3, TINY_SPEC.size)
    checkpoint = tmp_path / "run" / "last.pt"
    with pytest.raises(DivergedError, match=r"pretrain: the loss is nan at step 3; .*last.pt keeps step 2"):
        train(model, DivergingFrom(3), dataset, sampler, config.train, config.optimizer, checkpoint, plan=plan)
    assert torch.load(checkpoint, weights_only=True)["step"] == 2


@pytest.fixture
def gpus(monkeypatch):
    """Pretend torch sees ``count`` GPUs (nothing touches them: the checks come first)."""

    def see(count: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)

    monkeypatch.setattr(distributed, "_told_of_idle_gpus", False)
    return see


def test_two_replicas_mapped_to_one_gpu_are_refused_naming_the_cause(gpus, monkeypatch):
    gpus(1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(ConfigError, match=r"torchrun started 2 processes .* sees 1 GPU.*share cuda:0.*--nproc_per_node=1"):
        distributed.setup("auto")


def test_a_single_process_on_several_gpus_says_how_to_use_them_all_once(gpus, monkeypatch, caplog):
    gpus(4)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with caplog.at_level(logging.WARNING, logger=distributed.__name__):
        assert distributed.setup("auto").device == torch.device("cuda", 0)
        distributed.setup("auto")
    told = [record.getMessage() for record in caplog.records]
    assert len(told) == 1 and "4 GPUs" in told[0] and "torchrun --standalone --nproc_per_node=4 -m kedro run" in told[0]


def test_determinism_on_cuda_fixes_the_cublas_workspace_in_the_run_itself(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    flags = (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    try:
        configure_cuda(deterministic=False)
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
        configure_cuda(deterministic=True)
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8" and not torch.backends.cudnn.benchmark
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = flags
