"""Two-dimensional maps of an embedding space, in the geometry retrieval uses.

Embeddings are L2-normalised first (retrieval and the PA-Triplet loss compare unit vectors),
then projected with UMAP (neighbourhoods: clusters of classes) or PCA (linear: a jump seen
in the picture is a jump in the space, which suits a trajectory).
"""

from __future__ import annotations

import logging
from typing import Literal

import numpy as np

logger = logging.getLogger(__name__)

PROJECTIONS = ("umap", "pca")


def l2_normalise(embeddings: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    embeddings = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    return embeddings / np.where(norms > 0, norms, 1.0)


def project_2d(
    embeddings: np.ndarray, method: Literal["umap", "pca"] = "umap", *, seed: int = 0, n_neighbors: int = 15
) -> np.ndarray:
    """(n, 2) coordinates of the L2-normalised ``embeddings``.

    UMAP is seeded (and therefore single-threaded) so a picture can be redrawn identically;
    ``n_neighbors`` is capped at n - 1 for small sets.
    """
    points = l2_normalise(embeddings)
    if points.shape[0] < 3:
        raise ValueError(f"a 2-D map needs at least 3 points, got {points.shape[0]}")
    if method == "pca":
        centred = points - points.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        components = vt[:2]
        if components.shape[0] < 2:
            components = np.vstack([components, np.zeros_like(components[:1])])
        return centred @ components.T
    if method == "umap":
        import umap

        reducer = umap.UMAP(
            n_components=2, n_neighbors=min(n_neighbors, points.shape[0] - 1), random_state=seed, n_jobs=1
        )
        return reducer.fit_transform(points)
    raise ValueError(f"unknown projection {method!r}; choose one of {', '.join(PROJECTIONS)}")
