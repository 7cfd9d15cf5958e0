"""The resume protocol by itself: what a checkpoint holds and gives back, and when a run continues from it, starts over,
or is refused with the fix."""

import logging
import re
from dataclasses import asdict

import pytest
import torch

from fdsml.config import ConfigError
from fdsml.distributed import DistContext
from fdsml.models import build_model
from fdsml.models.checkpoint import load_checkpoint_file, save_checkpoint
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.precision import Precision
from fdsml.training.resume import Resumable, resume_state

ONE = DistContext(torch.device("cpu"))
FLOAT32 = LoopConfig(amp=False)


def parts(seed: int) -> Resumable:
    torch.manual_seed(seed)
    model = build_model("resnet18", embedding_dim=4, img_size=16)
    objective = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD([*model.parameters(), *objective.parameters()], lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (step + 1))
    return Resumable(model, objective, optimizer, scheduler)


def test_a_saved_state_restores_model_objective_optimiser_and_schedule_and_records_what_resume_checks(tmp_path):
    saved = parts(0)
    saved.model(torch.rand(2, 3, 16, 16)).sum().backward()
    for _ in range(3):
        saved.optimizer.step()
        saved.scheduler.step()
    history = [{"step": 3, "loss": 0.5}]
    saved.save(tmp_path / "last.pt", 3, history, FLOAT32, OptimizerConfig(), "abc", ONE)
    record = load_checkpoint_file(tmp_path / "last.pt")
    assert (record["fingerprint"], record["world_size"], record["precision"]) == ("abc", 1, str(Precision()))
    assert (record["loop"], record["optimizer_config"], record["model"]) == (asdict(FLOAT32), asdict(OptimizerConfig()), saved.model.config)
    restored = parts(1)
    assert restored.load(record) == (3, history)
    for before, after in ((saved.model, restored.model), (saved.objective, restored.objective)):
        for name, tensor in before.state_dict().items():
            assert torch.equal(tensor, after.state_dict()[name]), name
    assert restored.scheduler.last_epoch == 3 and restored.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 / 4)
    momentum = lambda part: [part.optimizer.state[p]["momentum_buffer"] for p in part.optimizer.param_groups[0]["params"] if p in part.optimizer.state]
    assert len(momentum(restored)) > 0 and all(torch.equal(a, b) for a, b in zip(momentum(saved), momentum(restored)))


def _checkpoint(path, **fields):
    save_checkpoint(path, {"step": 2, "history": [], "fingerprint": "abc", "world_size": 1, "precision": str(Precision())} | fields)
    return path


def test_a_run_continues_only_from_a_checkpoint_of_its_fingerprint_and_only_when_asked(tmp_path, caplog):
    path = _checkpoint(tmp_path / "run" / "last.pt")
    assert resume_state(path, FLOAT32, "abc", ONE, "pretrain/fdsl")["step"] == 2
    assert resume_state(path, LoopConfig(amp=False, resume=False), "abc", ONE, "pretrain/fdsl") is None
    assert resume_state(tmp_path / "none.pt", FLOAT32, "abc", ONE, "pretrain/fdsl") is None
    with caplog.at_level(logging.WARNING, logger="fdsml"):
        assert resume_state(path, FLOAT32, "other", ONE, "pretrain/fdsl") is None
    assert caplog.messages == [f"{path} belongs to another configuration: starting over instead of resuming"]
    unrecorded = _checkpoint(tmp_path / "old.pt", precision=None)  # from before precisions were recorded
    assert resume_state(unrecorded, FLOAT32, "abc", ONE, "pretrain/fdsl")["step"] == 2


def test_a_checkpoint_of_another_world_size_or_precision_is_refused_with_the_fix(tmp_path):
    path = _checkpoint(tmp_path / "run" / "last.pt", world_size=2)
    expected = (
        f"{path}: written by 2 process(es), this run has 1; resuming would keep the learning rate scaled for the old "
        f"global batch while the steps per epoch and data order change. Relaunch with 2 process(es) to continue, or start "
        f"over at 1: remove {path.parent} or set retrieval.train.resume: false"
    )
    with pytest.raises(ConfigError, match="^" + re.escape(expected) + "$"):
        resume_state(path, FLOAT32, "abc", ONE, "retrieval/scratch")
    bf16 = str(Precision(torch.bfloat16, torch.float32))
    _checkpoint(path, precision=bf16)
    with pytest.raises(ConfigError, match="^" + re.escape(f"{path}: trained in {bf16}, this run computes in {Precision()}")):
        resume_state(path, FLOAT32, "abc", ONE, "retrieval/scratch")
