"""Device and torch.distributed context: one process per GPU under ``torchrun``, or a single process.

``torchrun`` sets RANK, WORLD_SIZE and LOCAL_RANK; without them training runs in one process.
CUDA tensors travel over NCCL, CPU tensors (and Python objects) over gloo.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeVar

import torch
import torch.distributed as dist

from fdsml.config import ConfigError
from fdsml.gpu_presence import cuda_unusable_reason, nvidia_gpu_evidence

logger = logging.getLogger(__name__)

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


def resolve_device(
    preference: Literal["auto", "cpu", "cuda"], local_rank: int = 0, gpu_evidence: Callable[[], str | None] = nvidia_gpu_evidence
) -> torch.device:
    """CUDA when asked for or available (``auto``), the CPU when asked for or when the machine has no
    GPU (``gpu_evidence``, :func:`fdsml.gpu_presence.nvidia_gpu_evidence`); ``auto`` on a machine
    whose GPU torch cannot use stops, as does ``cuda`` without one."""
    if preference == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    if preference == "cuda":
        raise ConfigError(f"device: cuda was asked for but torch cannot use CUDA ({cuda_unusable_reason()}); set device: cpu to train on the CPU")
    evidence = gpu_evidence()
    if evidence is not None:
        raise ConfigError(
            f"device: auto found an NVIDIA GPU ({evidence}) that torch cannot use: {cuda_unusable_reason()}. "
            "Install a torch build this driver supports (or a newer driver), or set device: cpu to train on the CPU"
        )
    return torch.device("cpu")


# How long ranks above 0 wait for rank 0 to write a shared artefact (rendering a million images
# takes longer than the process group's 30 minutes); training collectives keep the default.
ARTEFACT_TIMEOUT = timedelta(hours=12)
_artefact_group: dist.ProcessGroup | None = None


def join_process_group() -> None:
    """Join torchrun's process group once: gloo for CPU tensors, plus NCCL for CUDA ones where torch sees a GPU.

    The backend does not depend on ``device``, so the data catalog can join before training
    knows where it runs.
    """
    global _artefact_group
    if dist.is_initialized():
        return
    dist.init_process_group(backend="cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    _artefact_group = dist.new_group(backend="gloo", timeout=ARTEFACT_TIMEOUT)


_told_of_idle_gpus = False


def check_gpus_for_replicas(device: torch.device) -> None:
    """One GPU per replica of this machine; a single process on a machine of several GPUs is told how to use them all.

    torchrun maps local rank ``r`` to ``cuda:r % device_count()``: with more processes than
    GPUs two replicas would share one, which NCCL refuses with an obscure error.
    """
    global _told_of_idle_gpus
    gpus = torch.cuda.device_count()
    if launched_by_torchrun():
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        if per_node > gpus:
            raise ConfigError(
                f"torchrun started {per_node} processes on this machine but torch sees {gpus} GPU(s): local rank "
                f"{os.environ.get('LOCAL_RANK', '0')} would share {device} with another replica. Start at most {gpus} "
                f"(torchrun --nproc_per_node={gpus}), or set train.device: cpu"
            )
    elif gpus > 1 and not _told_of_idle_gpus:
        _told_of_idle_gpus = True
        logger.warning(
            "%d GPUs are visible but this single process trains on %s alone; to train on all of them start "
            "`torchrun --standalone --nproc_per_node=%d -m kedro run ...` (the same arguments after `kedro run`)",
            gpus, device, gpus,
        )


def setup(preference: Literal["auto", "cpu", "cuda"] = "auto") -> DistContext:
    """Join the process group when launched by torchrun; return this process's context."""
    device = resolve_device(preference, int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        check_gpus_for_replicas(device)
        if launched_by_torchrun():
            torch.cuda.set_device(device)
    return current(device)


_alone = False


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Work one replica does by itself (rank 0's validation, a report) while the others are elsewhere.

    Every replica takes part, or none waits: inside, :func:`current` reports a single process,
    so whatever asks it (embedding, scoring) computes everything locally and calls no collective.
    """
    global _alone
    outer, _alone = _alone, True
    try:
        yield
    finally:
        _alone = outer


def current(device: str | torch.device = "cpu") -> DistContext:
    """This process's place among torchrun's replicas (joining their group once), or a single process
    (also inside :func:`alone`)."""
    device = torch.device(device)
    if _alone or not launched_by_torchrun():
        return DistContext(device)
    join_process_group()
    return DistContext(device, dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def await_main_rank() -> None:
    """Under torchrun, wait until every replica, rank 0 included, gets here (up to ``ARTEFACT_TIMEOUT``)."""
    if launched_by_torchrun():
        join_process_group()
        dist.barrier(group=_artefact_group)


def from_main_rank(value: Any, context: DistContext) -> Any:
    """Rank 0's ``value`` on every replica (pickled over gloo; other ranks' ``value`` is ignored)."""
    if not context.distributed:
        return value
    holder = [value if context.is_main else None]
    dist.broadcast_object_list(holder, src=0, device=torch.device("cpu"))
    return holder[0]


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


T = TypeVar("T")


def shard(length: int, context: DistContext) -> range:
    """This replica's contiguous share of ``length`` items, in rank order: ceil(length / world size)
    each, so the last replicas' shares are shorter, or empty when there are fewer items than replicas."""
    size = -(-length // context.world_size)
    return range(min(context.rank * size, length), min((context.rank + 1) * size, length))


def from_every_rank(value: Any, context: DistContext) -> list[Any]:
    """Every replica's ``value`` in rank order, on every replica (pickled over gloo)."""
    if not context.distributed:
        return [value]
    gathered = [None] * context.world_size
    dist.all_gather_object(gathered, value, group=_artefact_group)
    return gathered


def gather_on_main(value: Any, context: DistContext) -> list[Any] | None:
    """Every replica's ``value`` in rank order on rank 0 (pickled over gloo); None on the other ranks."""
    if not context.distributed:
        return [value]
    gathered = [None] * context.world_size if context.is_main else None
    dist.gather_object(value, gathered, dst=0, group=_artefact_group)
    return gathered


def _attempt(compute: Callable[[], T]) -> tuple[Exception | None, tuple[bool, T | str]]:
    """(the error, or None; and what to send the other replicas: (True, the result) or (False, the error as text))."""
    try:
        return None, (True, compute())
    except Exception as failure:
        return failure, (False, f"{type(failure).__name__}: {failure}")


def gather_results(compute: Callable[[], T], context: DistContext) -> list[T] | None:
    """Every replica's ``compute()`` in rank order on rank 0; None on the other ranks.

    When any replica fails, every replica raises (the failed ones their own error, the others a
    RuntimeError naming the failed ranks) instead of waiting in the gather for a share that never
    comes.
    """
    if not context.distributed:
        return [compute()]
    error, outcome = _attempt(compute)  # every rank must reach the gather below
    gathered = gather_on_main(outcome, context)
    failures = [[rank, value] for rank, (succeeded, value) in enumerate(gathered) if not succeeded] if context.is_main else None
    holder = [failures]
    dist.broadcast_object_list(holder, src=0, group=_artefact_group, device=torch.device("cpu"))
    if error is not None:
        raise error
    if holder[0]:
        raise RuntimeError("; ".join(f"rank {rank} failed: {message}" for rank, message in holder[0]))
    return [value for _, value in gathered] if context.is_main else None


def on_main_rank(compute: Callable[[], T], context: DistContext) -> T:
    """``compute()`` run by rank 0 alone; every replica returns its result.

    The other ranks wait (up to ``ARTEFACT_TIMEOUT``: a k-means over a large test set takes
    long) instead of computing the same thing. When rank 0 fails, it raises its error and the
    others raise a RuntimeError naming it, rather than wait for a result that never comes.
    """
    if not context.distributed:
        return compute()
    error, outcome = _attempt(compute) if context.is_main else (None, None)  # every rank must leave the broadcast below
    holder = [outcome]
    dist.broadcast_object_list(holder, src=0, group=_artefact_group, device=torch.device("cpu"))
    if error is not None:
        raise error
    succeeded, value = holder[0]
    if not succeeded:
        raise RuntimeError(f"rank 0 failed while computing for every replica: {value}")
    return value
