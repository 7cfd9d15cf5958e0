"""Seeds: the range every seed lies in, the random streams by purpose, and the one per-step formula of the training loop and the losses.

Low in the package on purpose: the training loop and the losses both import it, and a loss
must not import ``fdsml.training``.
"""

from __future__ import annotations

import numpy as np

SEED_LIMIT = 2**63
TAG_BASE = 2**32
"""Every purpose tag is at least this: above any class id, the first entry of the generator's own keys."""

STREAMS = {
    "class_balanced_batches": TAG_BASE + 1,  # (epoch,): one P x K epoch
    "explicit_batches": TAG_BASE + 2,  # (epoch, batch): one [anchors | first | second] batch
    "shuffled_batches": TAG_BASE + 3,  # (epoch,): one epoch's permutation
    "render_noise": TAG_BASE + 4,  # (epoch, row): fresh rendering noise of a table row
    "fresh_instance": TAG_BASE + 5,  # (epoch, row): a fresh instance of a row's class
    "holdout_split": TAG_BASE + 6,  # (): the held-out rows of a codes table
    "validation_rows": TAG_BASE + 7,  # (): the held-out images and triplets pre-training validates on
    "validation_probe": TAG_BASE + 8,  # (): the probe's subset of real images
    "augmentation": TAG_BASE + 9,  # (epoch, index): a fine-tuning image's augmentation
    "corruption": TAG_BASE + 10,  # (corruption, severity, index): one corrupted test image
    "corruption_subset": TAG_BASE + 11,  # (): the corrupted test images' subset
    "descriptor_validation": TAG_BASE + 12,  # (job,): the descriptor validation's jobs
    "analysis": TAG_BASE + 13,  # (picture,): the analysis pictures' draws
    "triplet_subsample": TAG_BASE + 14,  # (step, rank + 1 or 0): PA-Triplet's max_triplets subsample of a batch
    "nuisance": TAG_BASE + 15,  # (step, rank + 1 or 0): CouCE's MSRCI amplitude draws of a batch
    "tuning_sampler": TAG_BASE + 16,  # (trials in the study,): the sampler's draws for a study's next trial
    "rate_search_split": TAG_BASE + 17,  # (): the training classes or images a fine-tuning rate is chosen on
}
"""Each random stream's purpose and its tag, the first entry of its ``SeedSequence`` spawn key.

Two purposes drawn from the same seed (``pretrain.train.seed`` equals ``fractals.seed`` by
default) never share a stream. The one untagged purpose is the generator of a formula family
(:mod:`fdsml.families.generation`): class code ``(class_id,)`` and instance
``(class_id, replacement, instance_id)``, the keys that define every stored table; a class id
stays below ``TAG_BASE``.
"""


def stream(seed: int, purpose: str, *key: int) -> np.random.SeedSequence:
    """The ``SeedSequence`` of ``purpose`` (one of :data:`STREAMS`) for ``key`` under ``seed``."""
    if purpose not in STREAMS:
        raise KeyError(f"unknown random stream {purpose!r}; declare it in fdsml.seeds.STREAMS")
    return np.random.SeedSequence(seed, spawn_key=(STREAMS[purpose], *key))


def generator(seed: int, purpose: str, *key: int) -> np.random.Generator:
    """A NumPy generator on :func:`stream`."""
    return np.random.default_rng(stream(seed, purpose, *key))


def step_seed(seed: int, step: int, rank: int | None = None, purpose: str | None = None) -> int:
    """The seed of training step ``step`` of a run seeded ``seed``, in [0, 2**63).

    ``rank`` gives each distributed replica its own stream for the same step; without it every
    replica shares one. Without ``purpose`` it is the step's own seed (the loop seeds torch's
    global generator with it: dropout, drop-path); a draw of its own within the step (one of
    :data:`STREAMS`: ``triplet_subsample``, ``nuisance``) seeds its generator from that purpose's
    stream instead, so it never replays the global generator's numbers.
    """
    if purpose is not None:
        key = (step, 0 if rank is None else rank + 1)
        return int(stream(seed, purpose, *key).generate_state(1, np.uint64)[0]) % SEED_LIMIT
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
