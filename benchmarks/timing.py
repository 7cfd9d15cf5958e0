"""What the scripts of benchmarks/ share: their command line, the configuration they read, the clock, rounds that
alternate what they compare (so load on a shared machine hits every side alike), and the printed result."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch

from fdsml.timers import Stopwatch


COMMON = {
    "--json": {"action": "store_true", "help": "print the result as one JSON line"},
    "--threads": {"type": int, "help": "torch CPU threads (none given: torch's choice)"},
}
"""The options several scripts take, named in each script that takes them (docs' commands are checked against it)."""


def parser(doc: str, *common: str, threads: int | None = None) -> argparse.ArgumentParser:
    """A command line described by ``doc``'s first line, with the ``common`` options of :data:`COMMON`
    (``--threads`` defaulting to ``threads``)."""
    made = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    for option in common:
        made.add_argument(option, **COMMON[option], **({"default": threads} if option == "--threads" else {}))
    return made


def use_threads(count: int | None) -> None:
    """torch's CPU threads set to ``count`` (None leaves torch's choice)."""
    if count:
        torch.set_num_threads(count)


def parameters(env: str) -> dict:
    """conf/base's parameters overlaid key by key with ``env``'s, as ``kedro run --env`` reads them."""
    from fdsml.config import env_parameters

    return env_parameters("conf", env)


def seconds(work: Callable[[], object], device: torch.device | str = "cpu") -> float:
    """Seconds of ``work()`` on ``device`` (CUDA events on a GPU, the host clock otherwise)."""
    watch = Stopwatch(device)
    work()
    return watch.stop().seconds


def best_seconds(work: Callable[[], object], repeats: int, device: torch.device | str = "cpu") -> float:
    """The fastest of ``repeats`` calls of ``work()``: the one least disturbed by other work on the machine."""
    return min(seconds(work, device) for _ in range(repeats))


def interleaved(calls: dict, rounds: int, warmup: int = 0) -> dict[object, list]:
    """Each call's results over ``rounds`` rounds, the calls alternating in every round (a, b, a, b, ...) and
    called with the round's index; the first ``warmup`` rounds are run and left out."""
    results = {name: [] for name in calls}
    for round_ in range(warmup + rounds):
        for name, call in calls.items():
            result = call(round_)
            if round_ >= warmup:
                results[name].append(result)
    return results


def print_result(result: dict, as_json: bool) -> None:
    """``result`` as one JSON line, or one ``key: value`` line per entry, keys aligned."""
    if as_json:
        print(json.dumps(result))
        return
    width = max(len(key) for key in result)
    for key, value in result.items():
        print(f"{key:>{width}}: {value}")
