"""One replica of a two-process gloo run (spawned by test_distributed)."""

import os

import torch


def run_replica(rank: int, world_size: int, port: int, folder: str, table, render) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    from fdsml.training.pretrain import pretrain

    from .helpers import tiny_config

    torch.manual_seed(1000 + rank)  # replicas must not depend on their own global state
    config = tiny_config(folder, train={"max_steps": 4, "checkpoint_every": 2})
    payload, history = pretrain(table, render, config)
    torch.save({"state_dict": payload["state_dict"], "loss": history["loss"].tolist()}, f"{folder}/rank{rank}.pt")
    torch.distributed.destroy_process_group()
