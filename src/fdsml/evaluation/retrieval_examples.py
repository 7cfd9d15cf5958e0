"""Top-K retrievals for a few queries, drawn so a person sees what the embedding finds."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def nearest_neighbours(queries: np.ndarray, gallery: np.ndarray, k: int, *, same_set: bool) -> np.ndarray:
    """Indices of the ``k`` most cosine-similar gallery items per query (a query never finds itself)."""
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True).clip(1e-12)
    gallery = gallery / np.linalg.norm(gallery, axis=1, keepdims=True).clip(1e-12)
    similarity = queries @ gallery.T
    if same_set:
        np.fill_diagonal(similarity, -np.inf)
    return np.argsort(-similarity, axis=1, kind="stable")[:, :k]


def top_k_figure(query_images, query_labels, gallery_images, gallery_labels, neighbours: np.ndarray):
    """Rows = queries; the query, then its neighbours framed green (same label) or red (different)."""
    n_queries, k = neighbours.shape
    figure, axes = plt.subplots(n_queries, k + 1, figsize=(1.3 * (k + 1), 1.4 * n_queries), squeeze=False)
    for row in range(n_queries):
        _show(axes[row, 0], query_images[row], "query", "black")
        for column, index in enumerate(neighbours[row], start=1):
            correct = gallery_labels[index] == query_labels[row]
            _show(axes[row, column], gallery_images[index], f"#{column}", "tab:green" if correct else "tab:red")
    figure.suptitle("Top retrievals (green: same class, red: other class)", fontsize=9)
    figure.tight_layout()
    return figure


def _show(axis, image: np.ndarray, title: str, colour: str) -> None:
    axis.imshow(np.transpose(image, (1, 2, 0)) if image.ndim == 3 else image, cmap="gray")
    axis.set_title(title, fontsize=7, color=colour)
    axis.set_xticks([])
    axis.set_yticks([])
    for spine in axis.spines.values():
        spine.set_edgecolor(colour)
        spine.set_linewidth(3)
