"""Batch samplers for PA-Triplet pre-training, deterministic per (seed, epoch) and shardable by rank.

Every rank builds the same global sequence of batches for an epoch and takes batches
``rank, rank + R, rank + 2R, ...``: ranks see disjoint positions of one sequence, the same
number of steps each, and an unchanged global batch whatever the number of replicas.
``batches_per_epoch`` counts global batches (all ranks together).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from torch.utils.data import Sampler

from fdsml.losses.candidates import TripletPools
from fdsml.seeds import generator


class _RankSharded(Sampler[list[int]]):
    """Common bookkeeping: epoch, replicas, per-rank length."""

    def __init__(self, n_global: int, *, seed: int, num_replicas: int, rank: int):
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"need num_replicas >= 1 and 0 <= rank < num_replicas, got {num_replicas}, {rank}")
        if n_global < num_replicas:
            raise ValueError(f"{n_global} batches per epoch cannot feed {num_replicas} replicas")
        self.batches_per_epoch = n_global
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch: a new, reproducible sequence of batches."""
        self.epoch = epoch

    def _own_positions(self) -> range:
        """Positions of this rank's batches in the global sequence (the remainder is dropped)."""
        return range(self.rank, len(self) * self.num_replicas, self.num_replicas)

    def __len__(self) -> int:
        return self.batches_per_epoch // self.num_replicas


class ClassBalancedBatchSampler(_RankSharded):
    """Batches of P distinct classes x K distinct instances each (class-major layout).

    Each batch draws its P classes uniformly without replacement; each class hands out its
    instances in chunks of K from a fresh permutation, reshuffled once used up, so an instance
    returns within an epoch only after its whole class has been seen. Classes with fewer than
    K instances are refused (duplicated images would give zero-distance "pairs"); so are fewer
    than P classes. Default ``batches_per_epoch``: about one pass, ``n // (P * K)``.
    """

    def __init__(
        self,
        labels,
        classes_per_batch: int,
        instances_per_class: int,
        *,
        seed: int,
        num_replicas: int = 1,
        rank: int = 0,
        batches_per_epoch: int | None = None,
    ):
        labels = np.asarray(labels)
        if classes_per_batch < 1 or instances_per_class < 1:
            raise ValueError(f"classes_per_batch and instances_per_class must be positive, got {classes_per_batch}, {instances_per_class}")
        classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
        if classes.shape[0] < classes_per_batch:
            raise ValueError(f"classes_per_batch={classes_per_batch} but the data has only {classes.shape[0]} classes")
        if counts.min() < instances_per_class:
            small = classes[counts < instances_per_class]
            raise ValueError(
                f"instances_per_class={instances_per_class} but {small.shape[0]} class(es) have fewer instances "
                f"(e.g. class {small[0]!r} has {counts[counts < instances_per_class][0]})"
            )
        self.classes_per_batch = classes_per_batch
        self.instances_per_class = instances_per_class
        self.members = [np.flatnonzero(inverse == c) for c in range(classes.shape[0])]
        if batches_per_epoch is None:
            batches_per_epoch = max(labels.shape[0] // (classes_per_batch * instances_per_class), 1)
        super().__init__(batches_per_epoch, seed=seed, num_replicas=num_replicas, rank=rank)

    def global_batches(self) -> np.ndarray:
        """The epoch's whole sequence, (batches_per_epoch, P * K) indices, identical on every rank."""
        rng = generator(self.seed, "class_balanced_batches", self.epoch)
        n_batches, n_classes, k = self.batches_per_epoch, len(self.members), self.instances_per_class
        drawn = np.stack([rng.choice(n_classes, self.classes_per_batch, replace=False) for _ in range(n_batches)])
        flat = drawn.ravel()
        by_class = np.argsort(flat, kind="stable")
        draws_per_class = np.bincount(flat, minlength=n_classes)
        chunks = np.empty((flat.shape[0], k), dtype=np.int64)
        start = 0
        for c, n_draws in enumerate(draws_per_class):
            if n_draws == 0:
                continue
            members = self.members[c]
            per_pass = members.shape[0] // k
            passes = -(-n_draws // per_pass)
            stream = np.concatenate([rng.permutation(members)[: per_pass * k] for _ in range(passes)])
            chunks[by_class[start : start + n_draws]] = stream.reshape(-1, k)[:n_draws]
            start += n_draws
        return chunks.reshape(n_batches, -1)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.global_batches()
        for position in self._own_positions():
            yield batches[position].tolist()


class ExplicitTripletBatchSampler(_RankSharded):
    """Batches ``[anchors | first | second]`` of T triplets drawn per the filter (explicit mode).

    Global batch b of an epoch is drawn with its own generator (seed, "explicit_batches", epoch, b) through
    ``TripletPools`` (built once), so a rank draws only its own batches. Default
    ``batches_per_epoch``: about one pass of images, ``n // (3 * T)``.
    """

    def __init__(
        self,
        labels,
        triplets_per_batch: int,
        filter_name: str,
        *,
        seed: int,
        num_replicas: int = 1,
        rank: int = 0,
        batches_per_epoch: int | None = None,
    ):
        if triplets_per_batch < 1:
            raise ValueError(f"triplets_per_batch must be positive, got {triplets_per_batch}")
        self.labels = np.asarray(labels)
        self.triplets_per_batch = triplets_per_batch
        # Built once (data that cannot serve the filter fails here, not in the middle of an epoch).
        self.pools = TripletPools(self.labels, filter_name)
        if batches_per_epoch is None:
            batches_per_epoch = max(self.labels.shape[0] // (3 * triplets_per_batch), 1)
        super().__init__(batches_per_epoch, seed=seed, num_replicas=num_replicas, rank=rank)

    def batch(self, position: int) -> list[int]:
        """Global batch ``position`` of the current epoch."""
        rng = generator(self.seed, "explicit_batches", self.epoch, position)
        anchors, first, second = self.pools.sample(self.triplets_per_batch, rng)
        return np.concatenate([anchors, first, second]).tolist()

    def __iter__(self) -> Iterator[list[int]]:
        for position in self._own_positions():
            yield self.batch(position)


class ShuffledBatchSampler(_RankSharded):
    """Plain shuffled batches for fine-tuning: a fresh permutation per (seed, epoch), the tail dropped.

    Global batch b is the b-th slice of the epoch's permutation; rank r takes b = r, r + R, ...
    """

    def __init__(self, n_items: int, batch_size: int, *, seed: int, num_replicas: int = 1, rank: int = 0):
        if batch_size < 1 or n_items < batch_size:
            raise ValueError(f"batch_size must lie in [1, {n_items}] (the number of items), got {batch_size}")
        self.n_items = n_items
        self.batch_size = batch_size
        super().__init__(n_items // batch_size, seed=seed, num_replicas=num_replicas, rank=rank)

    def __iter__(self) -> Iterator[list[int]]:
        order = generator(self.seed, "shuffled_batches", self.epoch).permutation(self.n_items)
        for position in self._own_positions():
            yield order[position * self.batch_size : (position + 1) * self.batch_size].tolist()
