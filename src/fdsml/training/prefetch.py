"""The next batch made ready while the current one trains.

:class:`Prefetcher` reads a loader one batch ahead: each batch is copied to the device
(non-blocking, from pinned memory where the loader pins) and turned into the model's input by the
dataset's ``model_input`` (for ``pretrain.data.source: device``, the Triton renderer) as soon as the
batch before it is handed out. On CUDA that work runs on a side stream, so the next batch renders
while the current one trains; the step that :meth:`Staged.take`\\ s it makes the training stream wait
for the side stream's event (on the device, no host sync) and marks its tensors as used by that
stream, so the allocator does not hand their memory back to the side stream while the step runs.
On the CPU the same work runs in the same order, synchronously.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch


class CudaStreams:
    """The stream calls the prefetcher makes, torch.cuda's on ``device`` (a test passes a recorder with these methods)."""

    def __init__(self, device: torch.device):
        self.device = device

    def new_stream(self):
        return torch.cuda.Stream(self.device)

    def using(self, stream):
        """Work issued inside runs on ``stream``."""
        return torch.cuda.stream(stream)

    def current(self):
        return torch.cuda.current_stream(self.device)

    @staticmethod
    def keep_for(tensor: torch.Tensor, stream) -> None:
        """``tensor``'s memory stays allocated until ``stream``'s work queued so far is done."""
        tensor.record_stream(stream)


@dataclass
class Staged:
    """A batch prepared ahead; ``ready`` (CUDA) is the side stream's event that says it is done."""

    batch: dict[str, Any]
    ready: Any = None
    streams: Any = None

    def take(self) -> dict[str, Any]:
        """The batch, for work issued on the current stream from now on (which waits for it on the device)."""
        if self.ready is not None:
            consumer = self.streams.current()
            consumer.wait_event(self.ready)
            for value in self.batch.values():
                if torch.is_tensor(value):
                    self.streams.keep_for(value, consumer)
        return self.batch


class Prefetcher:
    """Batches of ``loader`` on ``device``, each prepared while the one before it is used (module docstring).

    ``model_input`` (a dataset's) turns the shipped images into the model's input on the device;
    ``channels_last`` lays them out so. ``streams``: the stream calls, by default torch.cuda's on a
    CUDA device and none elsewhere.
    """

    def __init__(
        self, device: torch.device, *, channels_last: bool = False, model_input: Callable | None = None, streams=None,
    ):  # fmt: skip
        self.device, self.channels_last, self.model_input = device, channels_last, model_input
        self.streams = streams if streams is not None or device.type != "cuda" else CudaStreams(device)
        self.side = self.streams.new_stream() if self.streams is not None else None

    def _prepared(self, batch: dict[str, Any]) -> dict[str, Any]:
        moved = {k: v.to(self.device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}
        if self.model_input is not None:
            moved["image"] = self.model_input(moved["image"])
        if self.channels_last:
            moved["image"] = moved["image"].contiguous(memory_format=torch.channels_last)
        return moved

    def _stage(self, batch: dict[str, Any]) -> Staged:
        if self.streams is None:
            return Staged(self._prepared(batch))
        with self.streams.using(self.side):
            prepared = self._prepared(batch)
            return Staged(prepared, self.side.record_event(), self.streams)

    def __call__(self, batches: Iterable[dict[str, Any]]) -> Iterator[Staged]:
        """``batches`` staged one ahead: the next is read and prepared before the current one is handed out."""
        iterator = iter(batches)
        ahead = self._next(iterator)
        while ahead is not None:
            current, ahead = ahead, self._next(iterator)
            yield current

    def _next(self, iterator: Iterator[dict[str, Any]]) -> Staged | None:
        batch = next(iterator, None)
        return None if batch is None else self._stage(batch)

