"""The epoch travels with every index, so DataLoader workers can live across epochs.

A worker holds its own copy of the dataset; ``set_epoch`` in the main process does not reach a
worker that persists. :class:`EpochBatches` tags each index of a batch sampler's batches with
the epoch, ``(epoch, index)``, and :class:`EpochItems` selects that epoch in whatever process
reads the item, so persistent workers render the same images as fresh ones, or as no workers.

A worker fetches a whole batch in one call (:func:`collated`): a dataset with a ``collated_items`` method
builds it in arrays, without a tensor and a dict per item; :func:`epoch_loader` is the DataLoader
that reads such batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from torch.utils.data import DataLoader, Dataset, Sampler, default_collate


class EpochBatches(Sampler[list[tuple[int, int]]]):
    """``sampler``'s batches at the epoch selected by :meth:`start`, from batch ``offset`` on, as (epoch, index) pairs.

    The offset resumes mid-epoch without rendering the skipped batches' images. ``start`` also
    calls ``sampler.set_epoch``; call it before each epoch's iteration, in the main process.
    """

    def __init__(self, sampler):
        self.sampler = sampler
        self.epoch = 0
        self.offset = 0

    def start(self, epoch: int, offset: int = 0) -> None:
        """Select the epoch and the batch position to begin at."""
        self.epoch, self.offset = epoch, offset
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for position, batch in enumerate(self.sampler):
            if position >= self.offset:
                yield [(self.epoch, int(index)) for index in batch]

    def __len__(self) -> int:
        return len(self.sampler) - self.offset


class EpochItems(Dataset):
    """``dataset[index]`` at ``epoch`` for the key ``(epoch, index)``: calls ``dataset.set_epoch`` when the epoch changes."""

    def __init__(self, dataset):
        self.dataset = dataset
        self.epoch: int | None = None

    def __len__(self) -> int:
        return len(self.dataset)

    def _select(self, epoch: int) -> None:
        if epoch != self.epoch and hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)
        self.epoch = epoch

    def __getitem__(self, key: tuple[int, int]):
        epoch, index = key
        self._select(epoch)
        return self.dataset[index]

    def __getitems__(self, keys: Sequence[tuple[int, int]]) -> dict:
        """One batch's items, collated; :class:`EpochBatches` tags a whole batch with one epoch."""
        epochs = {epoch for epoch, _ in keys}
        if len(epochs) != 1:
            raise ValueError(f"a batch must come from one epoch, got epochs {sorted(epochs)}")
        self._select(epochs.pop())
        return collated(self.dataset, [index for _, index in keys])


def collated(dataset, indices: Sequence[int]) -> dict:
    """``default_collate`` of ``dataset``'s items ``indices``: built by ``dataset.collated_items`` when it has one."""
    if hasattr(dataset, "collated_items"):
        return dataset.collated_items(np.asarray(indices, dtype=np.int64))
    return default_collate([dataset[int(index)] for index in indices])


def _already_collated(batch: dict) -> dict:
    return batch


def epoch_loader(dataset, batches: EpochBatches, *, num_workers: int, pin_memory: bool = False) -> DataLoader:
    """The DataLoader of ``batches`` (see :class:`EpochBatches`) over ``dataset``, its workers kept across epochs."""
    return DataLoader(
        EpochItems(dataset),
        batch_sampler=batches,
        collate_fn=_already_collated,
        num_workers=num_workers,
        pin_memory=pin_memory,
        persistent_workers=num_workers > 0,
    )
