"""Host synchronisations left on the training hot path: how many per step, and where.

A step of each objective (PA-Triplet batch mining, CouCE in full, the plain proxy loss as the baseline) runs forward,
backward and an optimiser step while every call that reads a tensor's value on the host is counted (``item``,
``tolist``, ``bool()``, ``int()``, ``float()``, an index taken from a tensor): on a GPU each one makes the host wait
for the device. The count is printed per step, by the innermost line of the project's code that led to it (a read
inside a library, e.g. pytorch-metric-learning's loss, is listed at the project's call), beside the baseline's.
Collectives (DDP, ``gather_across_ranks``) are not in these single-process steps. On CUDA, torch's own sync detector
(``torch.cuda.set_sync_debug_mode``) counts what it sees too.

The device source's rendering (``pretrain.data.source: device``), staged one batch ahead as the loop does, is counted
apart, reads and copies to the host (``.cpu()``) and ``torch.cuda.synchronize`` included: on a GPU as it runs (side
stream and hand-over included); without one through the same code with the kernel under Triton's interpreter,
counting the project's own calls.

    python benchmarks/host_syncs.py [--device cpu|cuda] [--steps 3]
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import traceback
import warnings
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # the device source's kernel on CPU tensors; read when Triton is first imported

from fdsml.losses.couce import CouCESettings, build_couce_objective  # noqa: E402
from fdsml.losses.proxy import build_proxy_loss  # noqa: E402
from fdsml.models import build_model  # noqa: E402
from fdsml.training.objectives import ProxyObjective  # noqa: E402
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective  # noqa: E402
from fdsml.training.prefetch import Prefetcher  # noqa: E402
from timing import parser  # noqa: E402

READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")
SOURCE = Path(__file__).resolve().parents[1] / "src"


@contextlib.contextmanager
def counted_reads(where: collections.Counter, reads: tuple[str, ...] = READS, direct: bool = False):
    """Count every host read of a tensor's value (``reads``, and ``torch.cuda.synchronize``), by the
    innermost file:line of the project's code above it; ``direct``: only the project's own calls
    (not a library's below them, e.g. Triton's interpreter standing in for the GPU)."""
    targets = [(torch.Tensor, name) for name in reads] + [(torch.cuda, "synchronize")]
    originals = {(owner, name): getattr(owner, name) for owner, name in targets}

    def counting(owner, name):
        def read(*args, **kwargs):
            callers = traceback.extract_stack(limit=12)[:-1]
            for frame in reversed(callers[-1:] if direct else callers):
                if frame.filename.startswith(str(SOURCE)):
                    where[f"{Path(frame.filename).relative_to(SOURCE)}:{frame.lineno} {name}"] += 1
                    break
            return originals[owner, name](*args, **kwargs)

        return read

    for owner, name in targets:
        setattr(owner, name, counting(owner, name))
    try:
        yield
    finally:
        for (owner, name), original in originals.items():
            setattr(owner, name, original)


def device_source_reads(device: torch.device, steps: int) -> collections.Counter:
    """Host reads per step of ``pretrain.data.source: device``'s rendering: a batch of packed codes staged
    as the loop stages it (:class:`~fdsml.training.prefetch.Prefetcher`: copied to ``device``, rendered by
    :meth:`~fdsml.data.device_render.DeviceRenderedCodes.model_input` with the Triton kernel, on a side
    stream on CUDA, and taken by the step). Without a GPU the kernel runs under ``TRITON_INTERPRET=1`` and only the project's own calls
    are counted: what the code would ask of a GPU, recorded rather than run."""
    import numpy as np

    from fdsml.data.device_render import DeviceRenderedCodes
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table

    spec = family_spec({"n_classes": 2, "instances_per_class": 2, "class_filter": {"enabled": False}, "workers": 1,
                        "render": {"size": 16, "points": 20, "burn_in": 3, "walkers": 8}})
    table, _ = generate_table(spec)
    dataset = DeviceRenderedCodes(table, spec, seed=1, fresh_noise=True, img_size=16)
    batch = dataset.collated_items(np.arange(len(table)))
    prefetcher = Prefetcher(device, model_input=functools.partial(dataset.model_input, kernel=True))
    where: collections.Counter = collections.Counter()
    with counted_reads(where, READS + ("cpu",), direct=device.type != "cuda"):
        for staged in prefetcher([batch] * steps):
            staged.take()
    return where


def objectives(classes: int, embedding: int) -> dict:
    return {"proxy loss (baseline)": ProxyObjective(build_proxy_loss("proxy_anchor", classes, embedding)),
            "PA-Triplet, batch mining": PATripletObjective("same", "batch"),
            "CouCE, every module": build_couce_objective(CouCESettings(dictionary_size=64), "proxy_anchor", classes, embedding)}  # fmt: skip


def main() -> None:
    command = parser(__doc__)
    command.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    command.add_argument("--steps", type=int, default=3)
    command.add_argument("--classes", type=int, default=4)
    command.add_argument("--instances", type=int, default=4)
    args = command.parse_args()
    device, batch_size, embedding = torch.device(args.device), args.classes * args.instances, 16
    generator = torch.Generator().manual_seed(0)
    batch = {"image": torch.randn(batch_size, 3, 32, 32, generator=generator).to(device),
             "label": (torch.arange(batch_size) // args.instances).to(device),
             "psi": torch.randn(batch_size, 12, generator=generator, dtype=torch.float64).to(device)}  # fmt: skip
    print(f"host reads per training step on {device} (batch {batch_size}, {args.steps} steps after one warm-up)")
    for name, objective in objectives(args.classes, embedding).items():
        torch.manual_seed(0)
        model = build_model("resnet18", img_size=32, embedding_dim=embedding).to(device)
        objective.to(device)
        parameters = list(model.parameters()) + list(objective.parameters())
        optimizer = torch.optim.SGD(parameters, lr=0.01)
        where: collections.Counter = collections.Counter()
        detected = 0
        for step in range(args.steps + 1):
            counter = where if step else collections.Counter()
            with counted_reads(counter), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if device.type == "cuda":
                    torch.cuda.set_sync_debug_mode("warn")
                loss, _ = objective(model, batch, step)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                if device.type == "cuda":
                    torch.cuda.set_sync_debug_mode("default")
            detected += len(caught) if step else 0
        total = sum(where.values()) / args.steps
        cuda_note = f", torch's detector {detected / args.steps:.1f}" if device.type == "cuda" else ""
        print(f"\n{name}: {total:.1f} per step{cuda_note}")
        for line, count in sorted(where.items()):
            print(f"  {count / args.steps:4.1f}  {line}")
    if device.type != "cuda" and torch.cuda.is_available():
        print("\npretrain.data.source: device: not counted on the CPU of a GPU machine (run with --device cuda)")
        return
    where = device_source_reads(device, args.steps)
    recorded = "" if device.type == "cuda" else " (the kernel's CUDA path, recorded under Triton's interpreter)"
    print(f"\npretrain.data.source: device, rendering a batch{recorded}: {sum(where.values()) / args.steps:.1f} per step")
    for line, count in sorted(where.items()):
        print(f"  {count / args.steps:4.1f}  {line}")


if __name__ == "__main__":
    main()
