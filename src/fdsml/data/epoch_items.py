"""The epoch travels with every index, so DataLoader workers can live across epochs.

A worker holds its own copy of the dataset; ``set_epoch`` in the main process does not reach a
worker that persists. :class:`EpochBatches` tags each index of a batch sampler's batches with
the epoch, ``(epoch, index)``, and :class:`EpochItems` selects that epoch in whatever process
reads the item, so persistent workers render the same images as fresh ones, or as no workers.
"""

from __future__ import annotations

from collections.abc import Iterator

from torch.utils.data import Dataset, Sampler


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

    def __getitem__(self, key: tuple[int, int]):
        epoch, index = key
        if epoch != self.epoch and hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)
        self.epoch = epoch
        return self.dataset[index]
