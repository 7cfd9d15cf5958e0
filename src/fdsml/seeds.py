"""Seeds: the range every seed lies in, and the one per-step formula of the training loop and the losses.

Low in the package on purpose: the training loop and the losses both import it, and a loss
must not import ``fdsml.training``.
"""

from __future__ import annotations

SEED_LIMIT = 2**63


def step_seed(seed: int, step: int, rank: int | None = None) -> int:
    """The seed of training step ``step`` of a run seeded ``seed``, in [0, 2**63).

    ``rank`` gives each distributed replica its own stream for the same step; without it every
    replica shares one.
    """
    base = seed * 1_000_003 + step
    return (base if rank is None else base * 1_009 + rank) % SEED_LIMIT


def replica_rank() -> int | None:
    """This process's rank among several ``torch.distributed`` replicas, for :func:`step_seed`; None in one process.

    None keeps a single process on the seeds it always had; replicas each get their own dropout,
    drop-path, mixing and subsampling draws instead of identical ones.
    """
    import torch.distributed as dist  # here: fdsml.config and the IFS generator import this module without torch

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist.get_rank()
    return None
