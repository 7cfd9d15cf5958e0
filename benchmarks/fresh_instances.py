"""Loader time per image: fresh instances (``pretrain.data.instances: fresh``) versus the table's, at the same settings.

    python benchmarks/fresh_instances.py --classes 10 --instances 10 --epochs 3 --json

For each rendering setting (the embedded default, 64 px / 4,000 points, and the published 256 px
/ 100,000 points) a small FineFractalDB table is generated, then ``FractalCodesDataset`` items are
read one by one in the main process (what one loader worker does): table instances with fresh
rendering noise (the default) and fresh instances (perturbation, contraction check, occupancy
rejection, descriptor), rounds of the two alternating and the fastest round of each kept, so a
busy machine slows neither alone. Prints one table of ms per image and the fresh / table ratio
(target: at most 1.20).
"""

from __future__ import annotations

import json
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from fdsml.data.fractal_dataset import FractalCodesDataset  # noqa: E402
from fdsml.families import FamilySpec  # noqa: E402
from fdsml.families.finefractaldb import FINEFRACTALDB  # noqa: E402
from fdsml.families.generation import generate_table  # noqa: E402
from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig, RenderSettings  # noqa: E402
from timing import interleaved, parser  # noqa: E402

SETTINGS = {
    "default 64 px / 4k points": RenderSettings(size=64, points=4_000),
    "published 256 px / 100k points": RenderSettings(size=256, points=100_000),
}


def seconds_per_image(dataset: FractalCodesDataset, epoch: int) -> float:
    dataset.set_epoch(epoch)
    started = time.perf_counter()
    for index in range(len(dataset)):
        dataset[index]
    return (time.perf_counter() - started) / len(dataset)


def measure(render: RenderSettings, args) -> dict:
    config = FineFractalDBConfig(
        seed=args.seed,
        n_classes=args.classes,
        instances_per_class=args.instances,
        render=render,
        class_filter=ClassFilter(size=128, points=20_000),
    )
    spec = FamilySpec(FINEFRACTALDB, config)
    table, summary = generate_table(spec)
    datasets = {
        "table": FractalCodesDataset(table, spec, seed=args.seed, fresh_noise=True),
        "fresh": FractalCodesDataset(table, spec, seed=args.seed, instances="fresh"),
    }
    for dataset in datasets.values():  # compile and warm caches outside the timing
        dataset[0]
    rounds = interleaved({name: lambda round_, name=name: seconds_per_image(datasets[name], round_ + 1) for name in datasets}, args.epochs)
    table_s, fresh_s = (float(np.min(rounds[name])) for name in ("table", "fresh"))
    return {
        "table_ms": 1e3 * table_s,
        "fresh_ms": 1e3 * fresh_s,
        "ratio": fresh_s / table_s,
        "instance_acceptance_rate": summary["instance_acceptance_rate"],
        "images_per_round": len(table),
        "rounds": args.epochs,
    }


def main() -> None:
    command = parser(__doc__, "--json")
    command.add_argument("--classes", type=int, default=10)
    command.add_argument("--instances", type=int, default=10)
    command.add_argument("--epochs", type=int, default=3, help="interleaved rounds over the table per mode")
    command.add_argument("--seed", type=int, default=0)
    args = command.parse_args()
    torch.set_num_threads(1)
    results = {name: measure(render, args) for name, render in SETTINGS.items()}
    print(f"{'setting':<32} {'table ms/img':>13} {'fresh ms/img':>13} {'fresh/table':>12}")
    for name, result in results.items():
        print(f"{name:<32} {result['table_ms']:>13.3f} {result['fresh_ms']:>13.3f} {result['ratio']:>12.3f}")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
