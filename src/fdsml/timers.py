"""Honest measurements of device work: wall time after the device finished, and peak memory; CPU seconds per stage.

CUDA kernels run asynchronously, so a timer read without synchronising measures the launch,
not the work. :class:`Stopwatch` times device work without stalling the host (CUDA events, read
later, when the loop synchronises anyway at a log interval). Host peak memory is read from
Linux's resident-set high-water mark (VmHWM), which this process resets on entry; elsewhere it
is reported as unknown (None).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def synchronize(device: torch.device | str) -> None:
    """Wait for the device's queued work (a no-op off CUDA)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


class Stopwatch:
    """Elapsed time of a stretch of work, started on creation and ended by :meth:`stop`.

    On CUDA two events on the current stream; reading :attr:`seconds` waits for the second one,
    so read it only where the host may wait. On the CPU the host clock, which is exact there.
    """

    def __init__(self, device: torch.device | str):
        self._cuda = torch.device(device).type == "cuda"
        if self._cuda:
            self._start, self._end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._start, self._end = time.perf_counter(), None

    def stop(self) -> Stopwatch:
        if self._cuda:
            self._end.record()
        else:
            self._end = time.perf_counter()
        return self

    @property
    def seconds(self) -> float:
        if self._end is None:
            raise RuntimeError("Stopwatch read before stop()")
        if self._cuda:
            self._end.synchronize()
            return self._start.elapsed_time(self._end) / 1e3
        return self._end - self._start

    def __float__(self) -> float:
        return self.seconds


class Measured:
    """Context manager: ``seconds`` (synchronised) and ``peak_bytes`` above the start of the block.

    On CUDA the peak is the allocator's; on the CPU it is the process's resident-set peak, which
    also counts memory freed inside the block but not returned to the system before.
    """

    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.seconds = 0.0
        self.peak_bytes: int | None = None

    def __enter__(self) -> Measured:
        synchronize(self.device)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        else:
            self._base = self._reset_host_peak()
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._started
        if self.device.type == "cuda":
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device) - self._base
        elif self._base is not None:
            self.peak_bytes = (_status_kib("VmHWM") - self._base) * 1024

    @staticmethod
    def _reset_host_peak() -> int | None:
        """The current resident set (KiB) after resetting the peak to it; None where Linux's files are absent."""
        try:
            _CLEAR_REFS.write_text("5")
            return _status_kib("VmRSS")
        except OSError:
            return None


class CpuSeconds:
    """CPU seconds this process spends in named stages (``time.process_time``: every thread's, Numba's and torch's
    too), summed over a stage's repeats: what a stage costs the machine, whatever else shares its cores."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.process_time()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.process_time() - started
