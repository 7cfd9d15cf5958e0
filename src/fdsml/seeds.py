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
