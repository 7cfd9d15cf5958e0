import socket

import torch
import torch.multiprocessing as mp

from .conftest import TINY_FRACTALS
from .ddp_worker import run_replica


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_gloo_replicas_end_with_identical_weights(tiny_table, tmp_path):
    args = (2, _free_port(), str(tmp_path), tiny_table, TINY_FRACTALS.render)
    mp.spawn(run_replica, args=args, nprocs=2, join=True)
    first, second = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2))
    assert first["loss"] == second["loss"]  # the logged loss is the mean over replicas
    for name, tensor in first["state_dict"].items():
        torch.testing.assert_close(second["state_dict"][name], tensor, rtol=0, atol=0, msg=name)
    assert (tmp_path / "last.pt").exists()  # written by rank 0
