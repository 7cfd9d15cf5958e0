"""Replicas of two-process gloo runs: spawned by test_distributed, or started as a "node" of its own.

``python -m tests.training.ddp_worker RANK WORLD_SIZE PORT RUN_DIR OUT THREADS`` pre-trains the
tiny configuration for 6 steps as one replica, with its own run folder (nodes share no disk).
"""

import os
import sys

import torch
import torch.nn.functional as F


def join(rank: int, world_size: int, port: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size)
    )


class DropoutProbe(torch.nn.Module):
    """An objective that also reports the dropout mask drawn from the loop's per-step seed, as one number."""

    def forward(self, model, batch, step=0):
        mask = F.dropout(torch.ones(20), 0.5, training=True) > 0
        code = float((mask.double() * 2 ** torch.arange(20, dtype=torch.double)).sum())
        return model(batch["image"]).pow(2).mean(), {"dropout_mask": code}

    def param_groups(self):
        return []


def draw_per_replica(rank: int, world_size: int, port: int, folder: str, table, spec) -> None:
    """Train two steps with :class:`DropoutProbe`, then mix one batch: save what this replica drew."""
    join(rank, world_size, port)
    from fdsml import distributed
    from fdsml.training.classification import MixupObjective, MixupSettings
    from fdsml.training.loop import train
    from fdsml.training.pretrain import build_batch_sampler, build_fractal_dataset, build_pretrain_model, plan_pretrain

    from .helpers import tiny_config

    config = tiny_config(f"{folder}/rank{rank}", train={"max_steps": 2})
    context = distributed.setup("cpu")
    plan = plan_pretrain(config, len(table), world_size).check()
    dataset = build_fractal_dataset(table, spec, config, None)
    sampler = build_batch_sampler(dataset.labels, config, context, plan)
    model = build_pretrain_model(config, 3, spec.size)
    result = train(model, DropoutProbe(), dataset, sampler, config.train, config.optimizer, f"{folder}/rank{rank}/last.pt", plan=plan)
    mixup = MixupObjective(2, MixupSettings(mixup_alpha=1.0), seed=0)
    batch = {"image": torch.arange(2 * 3 * 4 * 4, dtype=torch.float).reshape(2, 3, 4, 4), "label": torch.tensor([0, 1])}
    mixed_loss = mixup(lambda images: images.flatten(1)[:, :2], batch, step=3)[0].item()
    torch.save({"masks": result.history["dropout_mask"].tolist(), "mixup": mixed_loss}, f"{folder}/draws{rank}.pt")
    torch.distributed.destroy_process_group()


def main(rank: str, world_size: str, port: str, run_dir: str, out: str, threads: str) -> None:
    torch.set_num_threads(int(threads))  # every process sums on the same number of threads, or weights drift
    join(int(rank), int(world_size), int(port))
    from fdsml.families.finefractaldb import generate_finefractaldb
    from fdsml.training.pretrain import pretrain

    from tests.support import TINY_FRACTALS, TINY_SPEC
    from .helpers import tiny_config

    table, _ = generate_finefractaldb(TINY_FRACTALS)
    torch.manual_seed(1000 + int(rank))  # replicas must not depend on their own global state
    config = tiny_config(run_dir, train={"max_steps": 6, "checkpoint_every": 2})
    payload, history = pretrain(table, TINY_SPEC, config)
    torch.save({"state_dict": payload["state_dict"], "steps": history["step"].tolist(), "loss": history["loss"].tolist()}, out)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
