"""gpu_check.py's rendering speed rows: the Triton kernel alone in images/s, the host's packing per image,
and pre-training with ``source: device`` against ``source: render``.

The kernel is timed on the device (CUDA events, :func:`timing.seconds`) around :func:`fdsml.ifs.render_triton.render_tensors` on codes
already packed and on the device; the packing (Python on the host, per code) is timed on its own:
timing ``render_batch`` would report the host's packing rate whatever the GPU does. Whether the kernel
draws Numba's bytes is a test (``tests/ifs/test_render_triton.py``), which gpu_check.py runs as a row.
"""

from __future__ import annotations

import os
import statistics

import numpy as np
import torch

from fdsml.ifs import determinant_probabilities, sample_sigma_factor_code
from timing import best_seconds

KERNEL_SETTINGS = ((64, 4_000), (256, 100_000))
"""(size, points) of the kernel rows: the embedded default and the published setting."""
KERNEL_BATCH = 4096
KERNEL_WALKERS = 64
KERNEL_TARGET = 100_000
"""images/s at 256 px / 100,000 points on an H200 (the published CUDA on-the-fly renderer's order)."""
RENDER_SHARE_TARGET = 0.10
"""Most of a ViT-Tiny pre-training step rendering may take."""


def device_codes(count: int, device) -> tuple[torch.Tensor, ...]:
    """``count`` FineFractalDB-like codes packed (:func:`fdsml.ifs.render_triton.packed_codes`) and on ``device``, with seeds."""
    from fdsml.ifs.render_triton import packed_codes

    rng = np.random.default_rng(27)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(count)]
    packed = packed_codes(codes, [determinant_probabilities(code) for code in codes])
    seeds = rng.integers(2**62, size=count)
    return tuple(torch.as_tensor(array, device=device) for array in (*packed, seeds))


def kernel_seconds(tensors, size: int, points: int, repeats: int = 3) -> float:
    """The fastest of ``repeats`` renderings of the packed batch, timed on its device after a warm-up."""
    from fdsml.ifs.render_triton import render_tensors

    arguments = dict(size=size, points=points, mode="patch", margin=2, burn_in=20, walkers=KERNEL_WALKERS)
    render_tensors(*tensors, **arguments)
    return best_seconds(lambda: render_tensors(*tensors, **arguments), repeats, tensors[0].device)


def check_kernel(device, sizes, folder, size: int, points: int):
    """The renderer alone: images/s of a batch already packed and on the GPU."""
    rate = KERNEL_BATCH / kernel_seconds(device_codes(KERNEL_BATCH, device), size, points)
    target = points >= 100_000
    status = "ok" if not target or rate >= KERNEL_TARGET else "BELOW TARGET"
    goal = f"; target >= {KERNEL_TARGET:,} on an H200" if target else ""
    return status, f"{rate:,.0f} images/s (batch {KERNEL_BATCH}, W = {KERNEL_WALKERS}, CUDA events{goal})"


def check_packing(device, sizes, folder):
    """The host's share: packing codes for the kernel (:func:`fdsml.ifs.render_triton.packed_codes`) and the
    device source's packed rows (:class:`fdsml.data.device_render.DeviceRenderedCodes`), in µs per image."""
    from fdsml.data.device_render import DeviceRenderedCodes
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table
    from fdsml.ifs.render_triton import packed_codes

    rng = np.random.default_rng(27)
    count = 512
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(count)]
    probabilities = [determinant_probabilities(code) for code in codes]
    packing = best_seconds(lambda: packed_codes(codes, probabilities), 3) / count
    spec = family_spec({"n_classes": 8, "instances_per_class": 8, "class_filter": {"enabled": False}, "render": {"size": 32, "points": 200}})
    table, _ = generate_table(spec)
    dataset = DeviceRenderedCodes(table, spec, seed=1, fresh_noise=True)
    indices = np.arange(len(table))
    rows = best_seconds(lambda: dataset.collated_items(indices), 3) / len(indices)
    return "ok", f"packed_codes {packing * 1e6:.0f} µs/image, device source's packed rows {rows * 1e6:.0f} µs/image (host)"


def check_device_source(device, sizes, folder):
    """ViT-Tiny pre-training images/s at the published rendering (256 px, 100,000 points, shown to the
    model at 224 px), ``source: device`` against ``source: render`` with a loader worker per core, and
    rendering's share of a step (one batch's kernel time over the device source's step time)."""
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table
    from fdsml.training.pretrain import parse_pretrain_params, pretrain

    batch = 128
    spec = family_spec({"n_classes": 32, "instances_per_class": 8, "class_filter": {"enabled": False}, "workers": os.cpu_count(),
                        "render": {"size": 256, "points": 100_000, "walkers": KERNEL_WALKERS}})
    table, _ = generate_table(spec)
    speeds = {}
    for source in ("render", "device"):
        config = parse_pretrain_params({
            "objective": "pa_triplet",
            "model": {"backbone": "vit_tiny_patch16_224", "img_size": 224},
            "data": {"source": source, "classes_per_batch": 16, "instances_per_class": 8},
            "optimizer": {"name": "adamw", "base_lr": 0.001, "schedule": "constant"},
            "train": {"max_steps": 12, "device": device, "num_workers": os.cpu_count(), "checkpoint_every": 100, "log_every": 1},
            "validation": {"every": 0},
            "run_dir": str(folder / source),
        })
        _, history = pretrain(table, spec, config)
        speeds[source] = statistics.median(history["images_per_s"].iloc[4:])
    share = kernel_seconds(device_codes(batch, device), 256, 100_000) / (batch / speeds["device"])
    status = "ok" if share < RENDER_SHARE_TARGET else "BELOW TARGET"
    return status, (f"device {speeds['device']:,.0f} img/s, render with {os.cpu_count()} workers {speeds['render']:,.0f} img/s; "
                    f"rendering {share:.0%} of a device step (target < {RENDER_SHARE_TARGET:.0%})")
