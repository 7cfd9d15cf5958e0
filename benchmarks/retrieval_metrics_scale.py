"""The full retrieval metric set at SOP's test shape: total time and where it goes.

Random L2-normalised embeddings (default 60,000 x 512) in 11,316 classes (default; every class
gets 5 or 6 items, as in SOP's test split of 60,502 images) go through
:func:`fdsml.evaluation.retrieval.retrieval_metrics` once (Recall@1/10/100/1000, MAP@R,
R-Precision, NMI) under cProfile. Printed: the total, and the cumulative time of the parts:
faiss's neighbour search and k-means, scikit-learn's NMI, and pytorch-metric-learning's
label bookkeeping, among it ``get_relevance_mask``: the per-class Python loop (one pass over
all query labels per class) that MAP@R and R-Precision each run.

    python benchmarks/retrieval_metrics_scale.py [--items 60000] [--dim 512] [--classes 11316] [--threads N] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import json
import pstats
import time

import numpy as np
from pytorch_metric_learning.utils import accuracy_calculator
from pytorch_metric_learning.utils.inference import FaissKMeans, FaissKNN
from sklearn.metrics import normalized_mutual_info_score

from fdsml.evaluation.retrieval import retrieval_metrics, usable_cores

# The parts reported: (label, function); the cumulative seconds of each (its callees included).
PARTS = (
    ("faiss k-NN search (FaissKNN.__call__)", FaissKNN.__call__),
    ("faiss k-means for NMI (FaissKMeans.__call__)", FaissKMeans.__call__),
    ("NMI score (sklearn normalized_mutual_info_score)", normalized_mutual_info_score),
    ("label counts (pml get_label_match_counts)", accuracy_calculator.get_label_match_counts),
    ("lone queries (pml get_lone_query_labels)", accuracy_calculator.get_lone_query_labels),
    ("per-class loop (pml get_relevance_mask, MAP@R + R-Precision)", accuracy_calculator.get_relevance_mask),
    ("MAP@R (pml mean_average_precision, loop included)", accuracy_calculator.mean_average_precision),
    ("R-Precision (pml r_precision, loop included)", accuracy_calculator.r_precision),
)


def _cumulative(stats: pstats.Stats, function) -> tuple[float, int]:
    """(cumulative seconds, calls) of ``function`` in the profile (0, 0 when it never ran)."""
    code = inspect.unwrap(function).__code__
    row = stats.stats.get((code.co_filename, code.co_firstlineno, code.co_name))
    return (row[3], row[1]) if row else (0.0, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=60_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--classes", type=int, default=11_316)
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--threads", type=int, default=None, help="faiss threads (default: every usable core)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((args.items, args.dim), dtype=np.float32)
    labels = rng.permutation(np.arange(args.items) % args.classes)

    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    metrics = retrieval_metrics(embeddings, labels, ks=args.ks, threads=args.threads)
    profiler.disable()
    total = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    parts = {label: _cumulative(stats, function) for label, function in PARTS}
    figures = {
        "items": args.items,
        "dim": args.dim,
        "classes": args.classes,
        "faiss_threads": args.threads or usable_cores(),
        "total_s": round(total, 2),
        "parts_s": {label: round(seconds, 2) for label, (seconds, _) in parts.items()},
        "metrics": metrics,
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"{args.items} x {args.dim} embeddings in {args.classes} classes, faiss on {figures['faiss_threads']} thread(s)")
    print(f"{'part':<64} {'seconds':>9} {'share':>7} {'calls':>6}")
    for label, (seconds, calls) in parts.items():
        print(f"{label:<64} {seconds:>9.2f} {100 * seconds / total:>6.1f}% {calls:>6}")
    print(f"{'total (retrieval_metrics, profiled)':<64} {total:>9.2f} {100.0:>6.1f}%")
    print("metrics:", ", ".join(f"{name} {value:.4f}" for name, value in metrics.items()))


if __name__ == "__main__":
    main()
