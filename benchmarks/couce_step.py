"""Extra training cost of CouCE: time per training step against the plain proxy objective, as a ratio.

One model, one batch, one run: the baseline ``ProxyObjective`` (float32, and bf16 in its declared parts: the trunk
under autocast, head and loss in float32) and CouCE variants (+ODBA, +MSRCI, full) take turns, each step forward,
backward and an optimiser step; per variant, the median step time and its ratio to the baseline's (float32) median.

    python benchmarks/couce_step.py [--backbone resnet18] [--img-size 64] [--batch 32] [--repeats 10] [--threads 1]
"""

from __future__ import annotations

import copy
import statistics
import time

import torch

from fdsml.losses.couce import CouCEObjective, CouCESettings
from fdsml.losses.proxy import build_proxy_loss
from fdsml.models import build_model
from fdsml.training.objectives import ProxyObjective
from timing import interleaved, parser, use_threads

VARIANTS = {"+ ODBA": CouCESettings.baseline(odba=True), "+ MSRCI": CouCESettings.baseline(msrci=True), "full CouCE": CouCESettings()}


def _step(model, objective, optimizer, batch, bf16: bool = False) -> float:
    """Seconds of one step: forward (under bf16 autocast with ``bf16``), backward and the optimiser's step."""
    started = time.perf_counter()
    with torch.autocast(batch["image"].device.type, dtype=torch.bfloat16, enabled=bf16):
        loss, _ = objective(model, batch, 0)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if batch["image"].device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    command = parser(__doc__, "--threads")
    command.add_argument("--backbone", default="resnet18")
    command.add_argument("--img-size", type=int, default=64)
    command.add_argument("--batch", type=int, default=32)
    command.add_argument("--classes", type=int, default=8)
    command.add_argument("--embedding", type=int, default=128)
    command.add_argument("--loss", default="proxy_anchor")
    command.add_argument("--repeats", type=int, default=10)
    command.add_argument("--device", default="cpu")
    args = command.parse_args()
    use_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = build_model(args.backbone, embedding_dim=args.embedding, img_size=args.img_size).to(device).train()
    model.float32_head = "head" not in ProxyObjective.bf16_parts  # the bf16 row computes in the declared parts
    loss = build_proxy_loss(args.loss, args.classes, args.embedding)
    objectives = {"baseline": ProxyObjective(copy.deepcopy(loss))}
    objectives |= {name: CouCEObjective(copy.deepcopy(loss), args.embedding, settings) for name, settings in VARIANTS.items()}
    generator = torch.Generator().manual_seed(0)
    batch = {"image": torch.randn(args.batch, 3, args.img_size, args.img_size, generator=generator).to(device),
             "label": (torch.arange(args.batch) % args.classes).to(device)}  # fmt: skip
    groups = {name: [{"params": g["params"]} for g in objective.to(device).param_groups()] for name, objective in objectives.items()}
    optimizers = {name: torch.optim.SGD([{"params": model.parameters()}, *own], lr=1e-4) for name, own in groups.items()}
    steps = {name: lambda _, name=name: _step(model, objectives[name], optimizers[name], batch) for name in objectives}
    steps["baseline, bf16"] = lambda _: _step(model, objectives["baseline"], optimizers["baseline"], batch, bf16=True)
    times = interleaved(steps, args.repeats, warmup=2)  # the warm-up fills the ODBA dictionaries

    base = statistics.median(times["baseline"])
    print(f"{args.backbone} at {args.img_size} px, batch {args.batch}, {args.loss}, device {device}, "
          f"{torch.get_num_threads()} CPU threads, median of {args.repeats} interleaved steps")  # fmt: skip
    print(f"{'objective':>14} {'ms/step':>9} {'x baseline':>11}")
    for name, median in ((name, statistics.median(measured)) for name, measured in times.items()):
        print(f"{name:>14} {1000 * median:9.1f} {median / base:11.2f}")


if __name__ == "__main__":
    main()
