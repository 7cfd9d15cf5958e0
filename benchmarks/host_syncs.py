"""Host synchronisations left on the training hot path: how many per step, and where.

A step of each objective (PA-Triplet batch mining, CouCE in full, the plain proxy loss as the
baseline) runs forward, backward and an optimiser step while every call that reads a tensor's
value on the host is counted (``item``, ``tolist``, ``bool()``, ``int()``, ``float()``, an
index taken from a tensor): on a GPU each one makes the host wait for the device. The count is
printed per step, by the innermost line of the project's code that led to it (a read inside a
library, e.g. pytorch-metric-learning's loss, is listed at the project's call), beside the
baseline's. Collectives (DDP, ``gather_across_ranks``) are not in these single-process steps. On CUDA, torch's own sync
detector (``torch.cuda.set_sync_debug_mode``) counts what it sees too.

    python benchmarks/host_syncs.py [--device cpu|cuda] [--steps 3]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import traceback
import warnings
from pathlib import Path

import torch

from fdsml.losses.couce import CouCESettings, build_couce_objective
from fdsml.losses.proxy import build_proxy_loss
from fdsml.models import build_model
from fdsml.training.objectives import PATripletObjective, ProxyObjective

READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")
SOURCE = Path(__file__).resolve().parents[1] / "src"


@contextlib.contextmanager
def counted_reads(where: collections.Counter):
    """Count every host read of a tensor's value, by the innermost file:line of the project's code above it."""
    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def counting(name):
        def read(self, *args, **kwargs):
            for frame in reversed(traceback.extract_stack(limit=12)[:-1]):
                if frame.filename.startswith(str(SOURCE)):
                    where[f"{Path(frame.filename).relative_to(SOURCE)}:{frame.lineno} {name}"] += 1
                    break
            return originals[name](self, *args, **kwargs)

        return read

    for name in READS:
        setattr(torch.Tensor, name, counting(name))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def objectives(classes: int, embedding: int) -> dict:
    return {
        "proxy loss (baseline)": ProxyObjective(build_proxy_loss("proxy_anchor", classes, embedding)),
        "PA-Triplet, batch mining": PATripletObjective("same", "batch"),
        "CouCE, every module": build_couce_objective(CouCESettings(dictionary_size=64), "proxy_anchor", classes, embedding),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--instances", type=int, default=4)
    args = parser.parse_args()
    device, batch_size, embedding = torch.device(args.device), args.classes * args.instances, 16
    generator = torch.Generator().manual_seed(0)
    batch = {
        "image": torch.randn(batch_size, 3, 32, 32, generator=generator).to(device),
        "label": (torch.arange(batch_size) // args.instances).to(device),
        "psi": torch.randn(batch_size, 12, generator=generator, dtype=torch.float64).to(device),
    }
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


if __name__ == "__main__":
    main()
