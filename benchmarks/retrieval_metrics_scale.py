"""The full retrieval metric set at SOP's test shape: total time and where it goes.

Random embeddings (default 60,000 x 512) in 11,316 classes (default; every class gets 5 or 6 items, as in SOP's test
split of 60,502 images) go through :func:`fdsml.evaluation.retrieval.retrieval_metrics` once (Recall@1/10/100/1000,
MAP@R, R-Precision, NMI) under cProfile. Printed: the total, and the cumulative time of the parts: faiss's neighbour
search and k-means, scikit-learn's NMI, pytorch-metric-learning's label counts, and MAP@R and R-Precision.

Then the part pytorch-metric-learning spends in its per-class loop (``get_relevance_mask``: one pass over every query
label per class, run by its MAP@R and by its R-Precision), which we no longer run: its MAP@R and R-Precision against
ours on the same neighbour lists (random labels, the shape of the search's: items x max K), timed and checked equal.
``--loop-only`` runs just that part (minutes instead of the full set's 10-30 minutes on 2 cores).

    python benchmarks/retrieval_metrics_scale.py [--items 60000] [--dim 512] [--classes 11316] [--threads N] [--loop-only] [--json]
"""

from __future__ import annotations

import cProfile
import inspect
import json
import pstats
import time

import numpy as np
import torch
from pytorch_metric_learning.utils import accuracy_calculator
from pytorch_metric_learning.utils.inference import FaissKMeans, FaissKNN
from sklearn.metrics import normalized_mutual_info_score

from fdsml.evaluation.retrieval import _RetrievalCalculator, retrieval_metrics, usable_cores
from timing import parser

# The parts of the full metric set reported: (label, function); the cumulative seconds of each (callees included).
PARTS = (
    ("faiss k-NN search (FaissKNN.__call__)", FaissKNN.__call__),
    ("faiss k-means for NMI (FaissKMeans.__call__)", FaissKMeans.__call__),
    ("NMI score (sklearn normalized_mutual_info_score)", normalized_mutual_info_score),
    ("label counts (pml get_label_match_counts)", accuracy_calculator.get_label_match_counts),
    ("MAP@R (ours)", _RetrievalCalculator.calculate_mean_average_precision_at_r),
    ("R-Precision (ours)", _RetrievalCalculator.calculate_r_precision),
    ("pml per-class loop (get_relevance_mask): not run", accuracy_calculator.get_relevance_mask),
)


def _cumulative(stats: pstats.Stats, function) -> tuple[float, int]:
    """(cumulative seconds, calls) of ``function`` in the profile (0, 0 when it never ran)."""
    code = inspect.unwrap(function).__code__
    row = stats.stats.get((code.co_filename, code.co_firstlineno, code.co_name))
    return (row[3], row[1]) if row else (0.0, 0)


def full_metric_set(embeddings: np.ndarray, labels: np.ndarray, ks: list[int], threads: int | None) -> dict:
    """Seconds of the whole metric set and of each of its ``PARTS``, and the metrics."""
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    metrics = retrieval_metrics(embeddings, labels, ks=ks, threads=threads)
    profiler.disable()
    total = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    return {"total_s": total, "parts": {label: _cumulative(stats, function) for label, function in PARTS}, "metrics": metrics}


def per_class_loop(labels: np.ndarray, neighbours: int, rng: np.random.Generator) -> dict[str, float]:
    """Seconds of pytorch-metric-learning's MAP@R + R-Precision (with their per-class loop) and of ours, on
    the same neighbour lists of ``neighbours`` labels per query (self-search); both give the same values."""
    query_labels = torch.from_numpy(labels).float()
    knn_labels = query_labels[torch.from_numpy(rng.integers(0, len(labels), (len(labels), neighbours)))]
    counts = accuracy_calculator.get_label_match_counts(query_labels, query_labels, accuracy_calculator.EQUALITY)
    _, not_lone = accuracy_calculator.get_lone_query_labels(query_labels, counts, True, accuracy_calculator.EQUALITY)
    inputs = dict(knn_labels=knn_labels, query_labels=query_labels, not_lone_query_mask=not_lone, ref_includes_query=True, label_counts=counts)
    timings, values = {}, {}
    calculators = {"pml": accuracy_calculator.AccuracyCalculator(include=("r_precision",), k=neighbours),
                   "ours": _RetrievalCalculator((1,), include=("r_precision",), k=neighbours)}  # fmt: skip
    for name, calculator in calculators.items():
        started = time.perf_counter()
        values[name] = (calculator.calculate_mean_average_precision_at_r(**inputs), calculator.calculate_r_precision(**inputs))
        timings[f"{name}_s"] = time.perf_counter() - started
    if not np.allclose(values["pml"], values["ours"], rtol=1e-12, atol=0):
        raise AssertionError(f"MAP@R, R-Precision differ: library {values['pml']}, ours {values['ours']}")
    return timings


def main() -> None:
    command = parser(__doc__, "--json")
    command.add_argument("--items", type=int, default=60_000)
    command.add_argument("--dim", type=int, default=512)
    command.add_argument("--classes", type=int, default=11_316)
    command.add_argument("--ks", type=int, nargs="+", default=[1, 10, 100, 1000])
    command.add_argument("--threads", type=int, default=None, help="faiss threads (default: every usable core)")
    command.add_argument("--loop-only", action="store_true", help="only the per-class loop against ours")
    args = command.parse_args()
    rng = np.random.default_rng(0)
    labels = rng.permutation(np.arange(args.items) % args.classes)
    figures = {"items": args.items, "dim": args.dim, "classes": args.classes, "faiss_threads": args.threads or usable_cores()}
    if not args.loop_only:
        embeddings = rng.standard_normal((args.items, args.dim), dtype=np.float32)
        figures["full"] = full_metric_set(embeddings, labels, args.ks, args.threads)
    figures["map_r_and_r_precision"] = per_class_loop(labels, max(args.ks), rng)
    if args.json:
        print(json.dumps(figures, default=float))
        return
    print(f"{args.items} x {args.dim} embeddings in {args.classes} classes, faiss on {figures['faiss_threads']} thread(s)")
    if "full" in figures:
        total = figures["full"]["total_s"]
        print(f"{'part of the full metric set':<56} {'seconds':>9} {'share':>7} {'calls':>6}")
        for label, (seconds, calls) in figures["full"]["parts"].items():
            print(f"{label:<56} {seconds:>9.2f} {100 * seconds / total:>6.1f}% {calls:>6}")
        print(f"{'total (retrieval_metrics, profiled)':<56} {total:>9.2f} {100.0:>6.1f}%")
        print("metrics:", ", ".join(f"{name} {value:.4f}" for name, value in figures["full"]["metrics"].items()))
    loop = figures["map_r_and_r_precision"]
    print(f"MAP@R + R-Precision on {args.items} x {max(args.ks)} neighbour labels: pytorch-metric-learning (per-class loop) "
          f"{loop['pml_s']:.2f} s, ours {loop['ours_s']:.2f} s (same values)")  # fmt: skip


if __name__ == "__main__":
    main()
