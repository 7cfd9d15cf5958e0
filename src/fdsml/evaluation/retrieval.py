"""Retrieval metrics: Recall@K, MAP@R, R-Precision and NMI of an embedding space.

pytorch-metric-learning's ``AccuracyCalculator`` does the work, with faiss for the
neighbour search and the k-means; we add Recall@K for K > 1, which it lacks, computed
from the very same neighbour lists, and compute its MAP@R and R-Precision without its
per-class loop (same definitions, same values).

Conventions, chosen once here:

* **Distance.** Embeddings are L2-normalised first and searched with exact Euclidean
  distance (faiss ``IndexFlatL2``); on unit vectors this ranks neighbours exactly as
  cosine similarity does, and k-means (Euclidean) sees the same geometry.
* **Self-exclusion.** Without a query set every item queries all the others; an item is
  removed from its own neighbour list by index, never by distance, so an exact duplicate
  of the query still counts as a neighbour. With a query set (In-Shop) the queries
  search the gallery and nothing is excluded.
* **Queries without a relevant item** (a singleton class, or a query label absent from
  the gallery) can neither succeed nor fail: like the library, every retrieval metric
  (Recall@K, MAP@R, R-Precision) averages over the other queries only. NMI clusters
  all query items.
* **Ties** between equally distant neighbours are broken by the search, arbitrarily.
* **Threads.** faiss runs on ``threads`` OpenMP threads (default: every core this process may
  use), set for the call and restored after, so a caller decides how many cores the search takes.
  Under DDP only rank 0 computes the metrics (:func:`fdsml.distributed.on_main_rank`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import faiss
import numpy as np
import torch
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
from pytorch_metric_learning.utils.inference import FaissKMeans, FaissKNN

logger = logging.getLogger(__name__)

_KMEANS_ITERATIONS = 20


class _RetrievalCalculator(AccuracyCalculator):
    """The library's calculator plus ``recall_at_ks``, read off the same neighbour lists, and
    MAP@R and R-Precision computed in a few array operations.

    The library builds their relevance mask with a Python loop over the classes, each pass
    comparing every query label: at SOP's test shape (60,000 items, 11,316 classes) that loop
    took a fifth of the whole metric set's time (``benchmarks/retrieval_metrics_scale.py``), on
    one thread while faiss's parts use every core. The values are the library's definitions.
    """

    def __init__(self, ks: Sequence[int], **kwargs) -> None:
        self.ks = tuple(ks)
        super().__init__(**kwargs)

    def requires_knn(self) -> list[str]:
        return [*super().requires_knn(), "recall_at_ks", "query_hits"]

    def calculate_recall_at_ks(
        self, knn_labels: torch.Tensor, query_labels: torch.Tensor, not_lone_query_mask: torch.Tensor, **kwargs
    ) -> dict[int, float]:
        """Fraction of queries with at least one of their K nearest sharing their label."""
        hits = knn_labels[not_lone_query_mask] == query_labels[not_lone_query_mask, None]
        return {k: hits[:, :k].any(dim=1).double().mean().item() for k in self.ks}

    def calculate_query_hits(
        self, knn_labels: torch.Tensor, query_labels: torch.Tensor, not_lone_query_mask: torch.Tensor, **kwargs
    ) -> np.ndarray:
        """Whether each query with a relevant item has one as its nearest neighbour: Recall@1 query by query."""
        return (knn_labels[not_lone_query_mask, 0] == query_labels[not_lone_query_mask]).numpy()

    def calculate_mean_average_precision_at_r(self, **kwargs) -> float:
        """Mean over queries of (sum of precision@i at each hit i <= R) / R, R the query's relevant count."""
        hits, relevant = _hits_within_r(**kwargs)
        precision = hits.cumsum(dim=1).double() / torch.arange(1, hits.shape[1] + 1, dtype=torch.float64)
        return ((precision * hits).sum(dim=1) / relevant).mean().item()

    def calculate_r_precision(self, **kwargs) -> float:
        """Mean over queries of the fraction of the R nearest that are relevant."""
        hits, relevant = _hits_within_r(**kwargs)
        return (hits.sum(dim=1).double() / relevant).mean().item()


def _hits_within_r(
    knn_labels: torch.Tensor,
    query_labels: torch.Tensor,
    not_lone_query_mask: torch.Tensor,
    ref_includes_query: bool,
    label_counts: tuple[torch.Tensor, torch.Tensor],
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(hits among each query's R nearest, R) of the queries with a relevant item; R counts the
    query's label in the searched set, less the query itself when it is searched too."""
    knn_labels, query_labels = knn_labels[not_lone_query_mask], query_labels[not_lone_query_mask]
    classes, counts = label_counts  # torch.unique: classes sorted
    relevant = counts[torch.searchsorted(classes, query_labels)] - int(ref_includes_query)
    width = int(relevant.max()) if len(relevant) else 0  # no query with a relevant item: the means are NaN
    hits = (knn_labels[:, :width] == query_labels[:, None]) & (torch.arange(width) < relevant[:, None])
    return hits, relevant.double()


def retrieval_metrics(embeddings: np.ndarray | torch.Tensor, labels: np.ndarray | torch.Tensor, **options) -> dict[str, float]:
    """Recall@K for each K, MAP@R, R-Precision and NMI, as fractions in [0, 1] (``options``: :func:`retrieval_scores`'s)."""
    return retrieval_scores(embeddings, labels, **options)[0]


def retrieval_scores(
    embeddings: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    *,
    ks: Sequence[int],
    query_embeddings: np.ndarray | torch.Tensor | None = None,
    query_labels: np.ndarray | torch.Tensor | None = None,
    seed: int = 0,
    threads: int | None = None,
    recall_only: bool = False,
) -> tuple[dict[str, float], np.ndarray]:
    """Recall@K for each K, MAP@R, R-Precision and NMI, as fractions in [0, 1], and each scored query's Recall@1 hit
    (bool, the queries with a relevant item, in order), from the same neighbour lists: a difference between two
    embeddings of the same queries is then paired.

    ``embeddings``/``labels`` are the searched set; without ``query_embeddings`` each of
    them queries all the others, with them (In-Shop) the queries search ``embeddings``
    (the gallery). ``seed`` seeds the k-means behind NMI; ``threads`` bounds faiss's threads. Keys: ``recall@K``, ``map@r``,
    ``r_precision``, ``nmi``; with ``recall_only``, ``recall@K`` alone (the same values, from the K nearest only,
    no k-means): what a validation repeated during training needs.
    """
    gallery, gallery_labels = _as_arrays(embeddings, labels, "embeddings")
    if (query_embeddings is None) != (query_labels is None):
        raise ValueError("give query_embeddings and query_labels together, or neither")
    has_queries = query_embeddings is not None
    if has_queries:
        queries, queries_labels = _as_arrays(query_embeddings, query_labels, "query_embeddings")
        if queries.shape[1] != gallery.shape[1]:
            raise ValueError(
                f"query embeddings have {queries.shape[1]} dimensions, gallery embeddings {gallery.shape[1]}"
            )
    else:
        queries, queries_labels = gallery, gallery_labels
    # Contiguous codes: the library stores labels as float32, exact only below 2**24.
    _, codes = np.unique(np.concatenate([queries_labels, gallery_labels]), return_inverse=True)
    query_codes, gallery_codes = codes[: len(queries_labels)], codes[len(queries_labels) :]

    candidates = len(gallery) - (0 if has_queries else 1)
    ks = _check_ks(ks, candidates=candidates)
    num_neighbours = max(ks) if recall_only else _neighbours_needed(query_codes, gallery_codes, max(ks), candidates)
    calculator = _RetrievalCalculator(
        ks,
        include=("recall_at_ks", "query_hits")
        if recall_only
        else ("mean_average_precision_at_r", "r_precision", "NMI", "recall_at_ks", "query_hits"),
        k=num_neighbours,
        device=torch.device("cpu"),
        knn_func=FaissKNN(),
        kmeans_func=FaissKMeans(niter=_KMEANS_ITERATIONS, seed=seed, min_points_per_centroid=1, gpu=False),
    )
    query_tensor, query_code_tensor = torch.from_numpy(_l2_normalise(queries)), torch.from_numpy(query_codes)
    with faiss_threads(threads):
        if has_queries:
            result = calculator.get_accuracy(
                query_tensor,
                query_code_tensor,
                torch.from_numpy(_l2_normalise(gallery)),
                torch.from_numpy(gallery_codes),
                ref_includes_query=False,
            )
        else:
            result = calculator.get_accuracy(query_tensor, query_code_tensor)
    metrics = {f"recall@{k}": float(v) for k, v in result["recall_at_ks"].items()}
    if np.isnan(metrics[f"recall@{ks[0]}"]):
        raise ValueError("no query has a relevant item to retrieve: every query label is alone")
    if not recall_only:
        metrics["map@r"] = float(result["mean_average_precision_at_r"])
        metrics["r_precision"] = float(result["r_precision"])
        metrics["nmi"] = float(result["NMI"])
    logger.debug("retrieval metrics: %s", metrics)
    return metrics, result["query_hits"]


@contextmanager
def faiss_threads(threads: int | None) -> Iterator[int]:
    """faiss on ``threads`` OpenMP threads (None: every core this process may use) inside the block."""
    if threads is not None and threads < 1:
        raise ValueError(f"threads: must be a positive number of faiss threads, got {threads}")
    before = faiss.omp_get_max_threads()
    count = threads or usable_cores()
    faiss.omp_set_num_threads(count)
    try:
        yield count
    finally:
        faiss.omp_set_num_threads(before)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _as_arrays(embeddings, labels, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings as float32 (N, D), labels as int64 (N,), checked against each other."""
    if isinstance(embeddings, torch.Tensor):
        embeddings = embeddings.detach().cpu().numpy()
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
    classes = np.asarray(labels)
    if vectors.ndim != 2 or len(vectors) == 0:
        raise ValueError(f"{name}: expected a non-empty (N, D) array, got shape {vectors.shape}")
    if classes.shape != (len(vectors),):
        raise ValueError(f"{name}: {len(vectors)} embeddings but labels of shape {classes.shape}")
    if not np.issubdtype(classes.dtype, np.integer):
        raise ValueError(f"{name}: labels must be integers, got dtype {classes.dtype}")
    if not np.isfinite(vectors).all():
        raise ValueError(f"{name}: embeddings contain NaN or infinity")
    return vectors, classes.astype(np.int64)


def _l2_normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, np.finfo(np.float32).tiny)


def _check_ks(ks: Sequence[int], *, candidates: int) -> tuple[int, ...]:
    ks = tuple(int(k) for k in ks)
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be a non-empty list of positive integers, got {ks}")
    if max(ks) > candidates:
        raise ValueError(f"Recall@{max(ks)} needs at least {max(ks)} items to search, there are {candidates}")
    return ks


def _neighbours_needed(query_codes: np.ndarray, gallery_codes: np.ndarray, max_k: int, candidates: int) -> int:
    """Neighbours to fetch: enough for the largest K and for R of the largest class (MAP@R).

    The library checks k against the largest class count without discounting the query
    itself, so we fetch that many (one spare) unless the searched set is smaller.
    """
    size = int(max(query_codes.max(), gallery_codes.max())) + 1
    largest_class = int(np.bincount(gallery_codes, minlength=size)[np.unique(query_codes)].max())
    return min(max(max_k, largest_class), candidates)
