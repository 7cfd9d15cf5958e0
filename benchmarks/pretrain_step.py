"""Where a pre-training step's time goes: data (rendering), triplet construction, forward/backward.

    python benchmarks/pretrain_step.py --backbone resnet18 --size 64 --steps 10

Runs PA-Triplet (batch and explicit modes) and the FDSL cross-entropy baseline on the same
backbone and batch size, on the CPU and on CUDA when present, and prints one table with the
ratios the design targets: triplet construction as a share of the step, triplets per forwarded
image (batch vs explicit), and rendering throughput vs model throughput.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from fdsml.data import ClassBalancedBatchSampler, ExplicitTripletBatchSampler, FractalCodesDataset
from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb
from fdsml.ifs.render import RenderSettings
from fdsml.models import build_model
from fdsml.training.objectives import CrossEntropyObjective, PATripletObjective


def collate(dataset, indices):
    items = [dataset[i] for i in indices]
    return {
        "image": torch.stack([item["image"] for item in items]),
        "label": torch.tensor([item["label"] for item in items]),
        "psi": torch.stack([item["psi"] for item in items]),
    }


def measure(name, objective, model, dataset, sampler, device, steps):
    optimizer = torch.optim.SGD(list(model.parameters()) + list(objective.parameters()), lr=0.01)
    batches = iter(sampler)
    data_s = mining_s = compute_s = 0.0
    triplets = images = 0
    for step in range(steps + 1):
        started = time.perf_counter()
        batch = collate(dataset, next(batches))
        loaded = time.perf_counter()
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss, parts = objective(model, batch, step)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        finished = time.perf_counter()
        if step == 0:
            continue  # warm-up (Numba, allocator)
        data_s += loaded - started
        mining_s += float(parts.get("mining_s", 0.0))
        compute_s += finished - loaded
        triplets += int(parts.get("triplets", 0))
        images += batch["image"].shape[0]
    step_s = (data_s + compute_s) / steps
    return {
        "objective": name,
        "device": device.type,
        "data ms": 1e3 * data_s / steps,
        "triplets ms": 1e3 * mining_s / steps,
        "fwd/bwd ms": 1e3 * (compute_s - mining_s) / steps,
        "triplets % of step": 100 * mining_s / steps / step_s,
        "triplets / image": triplets / images,
        "rendered img/s": images / data_s,
        "model img/s": images / max(compute_s, 1e-9),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="resnet18")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--points", type=int, default=4000)
    parser.add_argument("--classes-per-batch", type=int, default=8)
    parser.add_argument("--instances-per-class", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()

    fractals = FineFractalDBConfig(
        n_classes=max(args.classes_per_batch, 10),
        instances_per_class=20,
        render=RenderSettings(size=args.size, points=args.points),
        class_filter=ClassFilter(size=256, points=20_000),
    )
    table, _ = generate_finefractaldb(fractals)
    dataset = FractalCodesDataset(table, FamilySpec(FINEFRACTALDB, fractals), seed=0, fresh_noise=True)
    batch = args.classes_per_batch * args.instances_per_class
    balanced = ClassBalancedBatchSampler(dataset.labels, args.classes_per_batch, args.instances_per_class, seed=0, batches_per_epoch=10_000)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    rows = []
    for device in devices:
        for name, objective, sampler, head in (
            ("pa_triplet batch (same)", PATripletObjective("same", "batch"), balanced, {}),
            (
                "pa_triplet explicit (same)",
                PATripletObjective("same", "explicit"),
                ExplicitTripletBatchSampler(dataset.labels, batch // 3, "same", seed=0, batches_per_epoch=10_000),
                {},
            ),
            ("fdsl", CrossEntropyObjective(), balanced, {"head": "classifier", "num_classes": fractals.n_classes}),
        ):
            torch.manual_seed(0)
            model = build_model(args.backbone, img_size=args.size, **head).to(device)
            if device.type == "cuda":
                model = model.to(memory_format=torch.channels_last)
            rows.append(measure(name, objective.to(device), model, dataset, sampler, device, args.steps))
    header = list(rows[0])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")
    explicit = next(r for r in rows if r["objective"].startswith("pa_triplet explicit"))
    batch_mode = next(r for r in rows if r["objective"].startswith("pa_triplet batch"))
    print(f"\nbatch mode / explicit mode triplets per image: {batch_mode['triplets / image'] / explicit['triplets / image']:.1f}x")
    print(f"rendering / model throughput (batch mode, single render thread): {batch_mode['rendered img/s'] / batch_mode['model img/s']:.1f}x")
    print(f"numpy {np.__version__}, torch {torch.__version__}, threads {torch.get_num_threads()}")


if __name__ == "__main__":
    main()
