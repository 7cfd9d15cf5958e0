"""Cost of PA-Triplet construction, and how many triplets each forwarded image serves.

For each filter and batch size (P classes x K instances), times ``mine_batch_triplets`` (filter
masks + descriptor distances + ordering) and the explicit mode's ordering, and prints
triplets per forwarded image for batch mode against explicit mode (1/3), as ratios.

    python benchmarks/triplet_mining.py [--device cuda] [--sizes 32 64 128] [--instances 4] [--threads 1]

Times are the best of several runs, the least disturbed by other work on a shared machine.
"""

from __future__ import annotations

import argparse
import time

import torch

from fdsml.losses.candidates import FILTERS
from fdsml.losses.pa_triplet import explicit_indices_tuple, mine_batch_triplets


def _best_seconds(function, device: torch.device, repeats: int) -> float:
    function()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--instances", type=int, default=4, help="K, instances per class in a batch")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    generator = torch.Generator(device="cpu").manual_seed(0)

    print(f"device {device}, {torch.get_num_threads()} CPU threads, K = {args.instances}, best of {args.repeats} runs")
    header = f"{'filter':>6} {'B':>5} {'P':>4} {'triplets':>10} {'mine ms':>9} {'x vs B0':>8} {'explicit ms':>12} {'trip/img':>9} {'vs explicit':>12}"
    print(header)
    for filter_name in FILTERS:
        base = None
        for size in args.sizes:
            classes = size // args.instances
            labels = torch.arange(classes).repeat_interleave(args.instances).to(device)
            psi = torch.randn(labels.shape[0], 6, generator=generator).to(device)
            mined = mine_batch_triplets(labels, psi, filter_name)
            seconds = _best_seconds(lambda: mine_batch_triplets(labels, psi, filter_name), device, args.repeats)
            explicit_psi = psi[: 3 * (labels.shape[0] // 3)]
            explicit_seconds = _best_seconds(lambda: explicit_indices_tuple(explicit_psi), device, args.repeats)
            base = base or seconds
            per_image = mined[0].shape[0] / labels.shape[0]
            print(
                f"{filter_name:>6} {labels.shape[0]:>5} {classes:>4} {mined[0].shape[0]:>10} {seconds * 1e3:>9.3f} "
                f"{seconds / base:>8.1f} {explicit_seconds * 1e3:>12.3f} {per_image:>9.1f} {per_image * 3:>11.0f}x"
            )


if __name__ == "__main__":
    main()
