"""Tiny pre-training configurations for tests (CPU, deterministic, a few steps), and a run killed mid-way."""

from contextlib import contextmanager

from fdsml.training import loop
from fdsml.training.pretrain import parse_pretrain_params


def tiny_config(run_dir, **overrides):
    params = {
        "objective": "pa_triplet",
        "pa_triplet": {"filter": "same", "mode": "batch"},
        "model": {"backbone": "resnet18", "embedding_dim": 16},
        "data": {"classes_per_batch": 3, "instances_per_class": 3, "triplets_per_batch": 4, "fresh_noise": False},
        "optimizer": {"name": "sgd", "base_lr": 2.0, "schedule": "constant"},
        "train": {"max_steps": 6, "seed": 0, "device": "cpu", "checkpoint_every": 2, "log_every": 1, "deterministic": True},
        "run_dir": str(run_dir),
    }
    for key, value in overrides.items():
        params[key] = params.get(key, {}) | value if isinstance(value, dict) else value
    return parse_pretrain_params(params)


@contextmanager
def killed_after_checkpoint(monkeypatch, step: int):
    """Inside, a training run stops (KeyboardInterrupt, as a kill would) right after writing its checkpoint of ``step``."""
    checkpoint = loop._Run.checkpoint

    def killed(run):
        checkpoint(run)
        if run.step == step:
            raise KeyboardInterrupt(f"killed after the checkpoint of step {step}")

    with monkeypatch.context() as patched:
        patched.setattr(loop._Run, "checkpoint", killed)
        yield
