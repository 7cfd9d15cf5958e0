"""Extra training cost of CouCE: time per training step against the plain proxy objective, as a ratio.

One model, one batch, one run: the baseline ``ProxyObjective`` and CouCE variants (+ODBA, +MSRCI, full) take turns,
each step being forward, backward and an optimiser step on the model and the proxies. Reported per variant: the
median step time and its ratio to the baseline's median.

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


def _step(model, objective, optimizer, batch) -> float:
    """Seconds of one step: forward, backward and the optimiser's step."""
    started = time.perf_counter()
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
    loss = build_proxy_loss(args.loss, args.classes, args.embedding)
    objectives = {"baseline": ProxyObjective(copy.deepcopy(loss))}
    objectives |= {name: CouCEObjective(copy.deepcopy(loss), args.embedding, settings) for name, settings in VARIANTS.items()}
    generator = torch.Generator().manual_seed(0)
    batch = {"image": torch.randn(args.batch, 3, args.img_size, args.img_size, generator=generator).to(device),
             "label": (torch.arange(args.batch) % args.classes).to(device)}  # fmt: skip
    optimizers = {}
    for name, objective in objectives.items():
        objective.to(device)
        params = [{"params": model.parameters()}] + [{"params": g["params"]} for g in objective.param_groups()]
        optimizers[name] = torch.optim.SGD(params, lr=1e-4)
    steps = {name: lambda _, name=name: _step(model, objectives[name], optimizers[name], batch) for name in objectives}
    times = interleaved(steps, args.repeats, warmup=2)  # the warm-up fills the ODBA dictionaries

    base = statistics.median(times["baseline"])
    print(f"{args.backbone} at {args.img_size} px, batch {args.batch}, {args.loss}, device {device}, "
          f"{torch.get_num_threads()} CPU threads, median of {args.repeats} interleaved steps")  # fmt: skip
    print(f"{'objective':>12} {'ms/step':>9} {'x baseline':>11}")
    for name, measured in times.items():
        median = statistics.median(measured)
        print(f"{name:>12} {1000 * median:9.1f} {median / base:11.2f}")


if __name__ == "__main__":
    main()
