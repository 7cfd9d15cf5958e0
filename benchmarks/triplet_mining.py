"""Cost of PA-Triplet batch mining at large batches: time and peak memory for every filter.

For each filter and batch size (P classes x K instances), runs ``mine_batch_triplets`` with ``max_triplets`` (filter
pools + uniform subsampling + descriptor ordering) and prints, as one table, the allowed triplets of the batch, the
time (best of several runs, the least disturbed by other work on a shared machine), the peak memory of one call (CUDA
allocator, or the host's resident-set peak), time as a ratio to the smallest batch, and triplets per forwarded image
against explicit mode (1/3 per image).

    python benchmarks/triplet_mining.py [--device cuda] [--sizes 256 512 1024] [--max-triplets 65536]
"""

from __future__ import annotations

import torch

from fdsml.losses.candidates import FILTERS
from fdsml.losses.pa_triplet import mine_batch_triplets, triplets_per_anchor
from fdsml.timers import Measured
from timing import parser, use_threads


def mining_cost(filter_name: str, size: int, instances: int, max_triplets: int, device, repeats: int) -> tuple[int, float, int | None]:
    """Mining one batch of ``size`` (``instances`` per class) after a warm-up call: the triplets kept, the
    fastest of ``repeats`` calls in seconds, and the largest peak memory in bytes (None where not measured)."""
    labels = torch.arange(size // instances, device=device).repeat_interleave(instances)
    psi = torch.randn(labels.shape[0], 6, device=device)
    generator = torch.Generator(device=device).manual_seed(0)
    mine = lambda: mine_batch_triplets(labels, psi, filter_name, max_triplets=max_triplets, generator=generator)  # noqa: E731
    mine()
    runs = []
    for _ in range(repeats):
        with Measured(device) as measured:
            kept = mine()[0].shape[0]
        runs.append(measured)
    peaks = [run.peak_bytes for run in runs if run.peak_bytes is not None]
    return kept, min(run.seconds for run in runs), max(peaks) if peaks else None


def main() -> None:
    command = parser(__doc__, "--threads")
    command.add_argument("--device", default="cpu")
    command.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    command.add_argument("--instances", type=int, default=4, help="K, instances per class in a batch")
    command.add_argument("--max-triplets", type=int, default=65536, help="triplets kept per batch")
    command.add_argument("--repeats", type=int, default=5)
    args = command.parse_args()
    use_threads(args.threads)
    device = torch.device(args.device)

    print(f"device {device}, {torch.get_num_threads()} CPU threads, K = {args.instances}, "
          f"max_triplets = {args.max_triplets}, best of {args.repeats} runs")  # fmt: skip
    print(f"{'filter':>6} {'B':>5} {'allowed':>13} {'kept':>7} {'ms':>9} {'peak MiB':>9} {'x vs B0':>8} {'vs explicit':>12}")
    for filter_name in FILTERS:
        base = None
        for size in args.sizes:
            classes = size // args.instances
            kept, seconds, peak = mining_cost(filter_name, size, args.instances, args.max_triplets, device, args.repeats)
            peak = f"{peak / 2**20:9.1f}" if peak is not None else f"{'n/a':>9}"
            base = base or seconds
            batch = classes * args.instances
            allowed = batch * triplets_per_anchor(filter_name, classes, args.instances)
            print(f"{filter_name:>6} {batch:>5} {allowed:>13,} {kept:>7} {seconds * 1e3:>9.2f} {peak} "
                  f"{seconds / base:>8.1f} {3 * kept / batch:>11.0f}x")


if __name__ == "__main__":
    main()
