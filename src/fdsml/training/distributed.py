"""Device and torch.distributed context: one process per GPU under ``torchrun``, or a single process.

``torchrun`` sets RANK, WORLD_SIZE and LOCAL_RANK; without them training runs in one process.
GPUs use NCCL, CPUs gloo.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    """Where this process trains and which replica it is."""

    device: torch.device
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def launched_by_torchrun() -> bool:
    """True inside a ``torchrun`` worker (its environment names a world size above one)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def resolve_device(preference: Literal["auto", "cpu", "cuda"], local_rank: int = 0) -> torch.device:
    """CUDA when asked for or available (``auto``), the CPU otherwise; asking for CUDA without one fails."""
    if preference == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device: cuda was asked for but torch sees no CUDA device; use device: auto or cpu")
    if preference in ("cuda", "auto") and torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def setup(preference: Literal["auto", "cpu", "cuda"] = "auto") -> DistContext:
    """Join the process group when launched by torchrun; return this process's context."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(preference, local_rank)
    if not launched_by_torchrun():
        return DistContext(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistContext(device, dist.get_rank(), dist.get_world_size(), local_rank)


def barrier(context: DistContext) -> None:
    """Wait for every replica (no-op in a single process)."""
    if context.distributed:
        dist.barrier()


def mean_across_ranks(value: torch.Tensor, context: DistContext) -> torch.Tensor:
    """The mean of a scalar over replicas (for logging the same loss everywhere)."""
    if not context.distributed:
        return value
    value = value.detach().clone()
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value / context.world_size


def broadcast_buffers(module: torch.nn.Module, context: DistContext) -> None:
    """Give every replica rank 0's buffers (BatchNorm statistics drift apart after the last forward)."""
    if context.distributed:
        for buffer in module.buffers():
            dist.broadcast(buffer, src=0)


def average_gradients(module: torch.nn.Module, context: DistContext) -> None:
    """All-reduce the gradients of parameters DDP does not own (an objective's proxies)."""
    if context.distributed:
        for parameter in module.parameters():
            if parameter.grad is not None:
                dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
                parameter.grad /= context.world_size
