"""retrieval_metrics against a brute-force reading of the definitions (tests/evaluation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytorch_metric_learning.utils.inference import FaissKNN

from fdsml.evaluation import retrieval_metrics

KS = (1, 2, 4, 8)


def brute_force(queries, query_labels, gallery, gallery_labels, ks, *, self_search, relevant_first):
    """The definitions, one query at a time, in float64.

    Exact ties (duplicate vectors) are broken with relevant items first (``relevant_first``)
    or last, which bounds any tie-breaking. Queries with nothing relevant are left out.
    """
    normalise = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    queries, gallery = normalise(np.asarray(queries, float)), normalise(np.asarray(gallery, float))
    scores = {f"recall@{k}": [] for k in ks} | {"map@r": [], "r_precision": []}
    for i, (query, label) in enumerate(zip(queries, query_labels)):
        candidates = np.array([j for j in range(len(gallery)) if not (self_search and j == i)])
        distances = np.sum((gallery[candidates] - query) ** 2, axis=1)
        relevant = gallery_labels[candidates] == label
        r = int(relevant.sum())
        if r == 0:
            continue
        tie_key = ~relevant if relevant_first else relevant
        ranked = relevant[np.lexsort((tie_key, distances))]
        for k in ks:
            scores[f"recall@{k}"].append(ranked[:k].any())
        hits = ranked[:r]
        scores["r_precision"].append(hits.sum() / r)
        scores["map@r"].append(np.sum(hits * np.cumsum(hits) / np.arange(1, r + 1)) / r)
    return {key: float(np.mean(values)) for key, values in scores.items()}


def with_duplicates(rng, n_items, n_classes, n_dup, dim=8, *, same_label_duplicates):
    """Random unit-ish vectors where the last ``n_dup`` items copy earlier ones, plus singletons."""
    vectors = rng.normal(size=(n_items, dim))
    labels = rng.integers(0, n_classes, size=n_items)
    labels[:3] = [100, 101, 102]  # three singleton classes
    sources = rng.choice(np.arange(3, n_items - n_dup), size=n_dup, replace=False)
    vectors[n_items - n_dup :] = vectors[sources]
    labels[n_items - n_dup :] = labels[sources] if same_label_duplicates else rng.integers(0, n_classes, n_dup)
    return vectors, labels


def assert_between(metrics, low, high):
    for key in low:
        assert low[key] - 1e-9 <= metrics[key] <= high[key] + 1e-9, (key, low[key], metrics[key], high[key])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_self_search_matches_brute_force_with_duplicates_and_singletons(seed):
    rng = np.random.default_rng(seed)
    vectors, labels = with_duplicates(rng, 80, 5, 15, same_label_duplicates=True)
    metrics = retrieval_metrics(vectors, labels, ks=KS)
    expected = brute_force(vectors, labels, vectors, labels, KS, self_search=True, relevant_first=True)
    # duplicates share their label, so tie-breaking cannot matter: the bounds coincide
    assert expected == brute_force(vectors, labels, vectors, labels, KS, self_search=True, relevant_first=False)
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, abs=1e-9), key
    assert set(metrics) == {*(f"recall@{k}" for k in KS), "map@r", "r_precision", "nmi"}
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in metrics.values())


@pytest.mark.parametrize("seed", [3, 4])
def test_ties_across_labels_stay_within_the_tie_breaking_bounds(seed):
    rng = np.random.default_rng(seed)
    vectors, labels = with_duplicates(rng, 80, 4, 25, same_label_duplicates=False)
    metrics = retrieval_metrics(vectors, labels, ks=KS)
    low = brute_force(vectors, labels, vectors, labels, KS, self_search=True, relevant_first=False)
    high = brute_force(vectors, labels, vectors, labels, KS, self_search=True, relevant_first=True)
    assert low != high  # the data really has ties that matter
    assert_between(metrics, low, high)


def test_query_set_searches_the_gallery_and_matches_brute_force():
    rng = np.random.default_rng(5)
    gallery = rng.normal(size=(60, 8))
    gallery_labels = rng.integers(0, 6, size=60)
    queries = np.concatenate([gallery[:10], rng.normal(size=(25, 8))])  # exact copies of gallery items
    query_labels = np.concatenate([gallery_labels[:10], rng.integers(0, 6, size=24), [77]])  # 77: absent
    ks = (1, 10, 20)
    metrics = retrieval_metrics(gallery, gallery_labels, ks=ks, query_embeddings=queries, query_labels=query_labels)
    expected = brute_force(queries, query_labels, gallery, gallery_labels, ks, self_search=False, relevant_first=True)
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, abs=1e-9), key


def test_hand_computed_example_on_the_circle():
    # angles 0, 10, 20, 90, 100 degrees; labels a a b b b (b = 1)
    angles = np.deg2rad([0.0, 10.0, 20.0, 90.0, 100.0])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    labels = np.array([0, 0, 1, 1, 1])
    metrics = retrieval_metrics(vectors, labels, ks=(1, 2))
    # item0: R=1, nearest is item1 (a)               -> R@1 1, R@2 1, RP 1, AP 1
    # item1: R=1, item0 (a) and item2 (b) both 10 deg -> a tie: R@1, RP, AP in {0, 1}; R@2 1
    # item2: R=2, list item1 (a), item0 (a), ...     -> all 0
    # item3: R=2, list item4 (b), item2 (b)          -> all 1
    # item4: R=2, list item3 (b), item2 (b)          -> all 1
    low = {"recall@1": 3 / 5, "recall@2": 4 / 5, "r_precision": 3 / 5, "map@r": 3 / 5}
    high = {"recall@1": 4 / 5, "recall@2": 4 / 5, "r_precision": 4 / 5, "map@r": 4 / 5}
    assert_between(metrics, low, high)
    # without the tie (item1 nudged towards item0) every value is exact
    angles[1] = np.deg2rad(9.0)
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    metrics = retrieval_metrics(vectors, labels, ks=(1, 2))
    assert metrics["recall@1"] == pytest.approx(4 / 5)
    assert metrics["recall@2"] == pytest.approx(4 / 5)
    assert metrics["r_precision"] == pytest.approx(4 / 5)
    assert metrics["map@r"] == pytest.approx(4 / 5)


def test_a_duplicate_of_the_query_is_its_neighbour_not_excluded_as_self():
    base = np.random.default_rng(6).normal(size=(4, 5))
    vectors = np.repeat(base, 2, axis=0)  # every item has one exact twin with its label
    labels = np.repeat(np.arange(4), 2)
    metrics = retrieval_metrics(vectors, labels, ks=(1,))
    assert metrics["recall@1"] == 1.0
    assert metrics["map@r"] == 1.0
    assert metrics["r_precision"] == 1.0


def test_singleton_queries_are_left_out_of_retrieval_averages():
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(30, 6)) + 5.0  # all in one orthant
    labels = rng.integers(0, 3, size=30)
    base = retrieval_metrics(vectors, labels, ks=(1, 2))
    # a singleton far away (opposite direction): never among anyone's nearest
    extended = retrieval_metrics(np.vstack([vectors, -np.ones(6)]), np.append(labels, 9), ks=(1, 2))
    for key in ("recall@1", "recall@2", "map@r", "r_precision"):
        assert extended[key] == pytest.approx(base[key], abs=1e-12), key


def test_every_label_alone_is_an_error():
    with pytest.raises(ValueError, match="alone"):
        retrieval_metrics(np.eye(4), np.arange(4), ks=(1,))


def test_nmi_is_one_for_separated_clusters_and_low_for_shuffled_labels():
    rng = np.random.default_rng(8)
    centres = np.eye(5) * 10
    labels = np.repeat(np.arange(5), 20)
    vectors = centres[labels] + rng.normal(scale=0.1, size=(100, 5))
    assert retrieval_metrics(vectors, labels, ks=(1,))["nmi"] == pytest.approx(1.0)
    shuffled = rng.permutation(labels)
    first = retrieval_metrics(vectors, shuffled, ks=(1,), seed=3)
    assert first["nmi"] < 0.3
    assert retrieval_metrics(vectors, shuffled, ks=(1,), seed=3)["nmi"] == first["nmi"]


def test_large_label_values_and_torch_inputs_give_the_same_numbers():
    rng = np.random.default_rng(9)
    vectors = rng.normal(size=(40, 8))
    labels = rng.integers(0, 4, size=40)
    reference = retrieval_metrics(vectors, labels, ks=(1, 4))
    # labels beyond float32's exact integers must not merge classes
    shifted = retrieval_metrics(vectors, labels * 3 + 2**40, ks=(1, 4))
    as_torch = retrieval_metrics(torch.from_numpy(vectors), torch.from_numpy(labels), ks=(1, 4))
    assert shifted == reference
    assert as_torch == reference


def test_scale_of_embeddings_does_not_matter():
    rng = np.random.default_rng(10)
    vectors = rng.normal(size=(40, 8))
    labels = rng.integers(0, 4, size=40)
    scaled = vectors * rng.uniform(0.1, 10.0, size=(40, 1))
    a, b = retrieval_metrics(vectors, labels, ks=(1, 4)), retrieval_metrics(scaled, labels, ks=(1, 4))
    for key in ("recall@1", "recall@4", "map@r", "r_precision"):
        assert a[key] == pytest.approx(b[key]), key


def test_bad_inputs_fail_with_a_message():
    vectors, labels = np.zeros((5, 3)) + 1, np.array([0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="Recall@8"):
        retrieval_metrics(vectors, labels, ks=(1, 8))
    with pytest.raises(ValueError, match="labels of shape"):
        retrieval_metrics(vectors, labels[:4], ks=(1,))
    with pytest.raises(ValueError, match="together"):
        retrieval_metrics(vectors, labels, ks=(1,), query_embeddings=vectors)
    with pytest.raises(ValueError, match="integers"):
        retrieval_metrics(vectors, labels.astype(float), ks=(1,))


def test_faiss_runs_on_the_threads_asked_for_and_gets_its_setting_back(monkeypatch):
    import faiss

    before, seen = faiss.omp_get_max_threads(), []
    knn_call = FaissKNN.__call__

    def searching(*args, **kwargs):
        seen.append(faiss.omp_get_max_threads())
        return knn_call(*args, **kwargs)

    monkeypatch.setattr(FaissKNN, "__call__", searching)
    rng = np.random.default_rng(0)
    retrieval_metrics(rng.normal(size=(20, 4)), np.repeat(np.arange(5), 4), ks=(1,), threads=1)
    assert seen == [1] and faiss.omp_get_max_threads() == before
    with pytest.raises(ValueError, match="threads: must be a positive"):
        retrieval_metrics(rng.normal(size=(20, 4)), np.repeat(np.arange(5), 4), ks=(1,), threads=0)


@pytest.mark.parametrize("query_set", [False, True])
def test_map_at_r_and_r_precision_equal_the_librarys_without_its_per_class_loop(monkeypatch, query_set):
    from pytorch_metric_learning.utils import accuracy_calculator
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    rng = np.random.default_rng(3)
    gallery, gallery_labels = rng.normal(size=(300, 8)).astype(np.float32), rng.integers(0, 60, 300)
    queries, query_labels = rng.normal(size=(120, 8)).astype(np.float32), rng.integers(0, 70, 120)  # some absent
    unit = lambda x: torch.from_numpy(x / np.linalg.norm(x, axis=1, keepdims=True))  # noqa: E731
    library = AccuracyCalculator(include=("mean_average_precision_at_r", "r_precision"), k="max_bin_count", knn_func=FaissKNN())
    if query_set:
        expected = library.get_accuracy(unit(queries), torch.from_numpy(query_labels), unit(gallery), torch.from_numpy(gallery_labels))
        ours = {"query_embeddings": queries, "query_labels": query_labels}
    else:
        expected = library.get_accuracy(unit(gallery), torch.from_numpy(gallery_labels))
        ours = {}

    def per_class_loop(*args, **kwargs):
        raise AssertionError("the library's per-class loop ran")

    monkeypatch.setattr(accuracy_calculator, "get_relevance_mask", per_class_loop)
    metrics = retrieval_metrics(gallery, gallery_labels, ks=(1,), **ours)
    assert metrics["map@r"] == pytest.approx(expected["mean_average_precision_at_r"], rel=1e-12)
    assert metrics["r_precision"] == pytest.approx(expected["r_precision"], rel=1e-12)


def test_recall_only_gives_the_full_metrics_recall_without_the_others():
    rng = np.random.default_rng(3)
    embeddings, labels = rng.normal(size=(120, 16)).astype(np.float32), rng.integers(0, 12, 120)
    queries, query_labels = rng.normal(size=(30, 16)).astype(np.float32), rng.integers(0, 12, 30)
    for extra in ({}, {"query_embeddings": queries, "query_labels": query_labels}):
        full = retrieval_metrics(embeddings, labels, ks=(1, 4), **extra)
        alone = retrieval_metrics(embeddings, labels, ks=(1, 4), recall_only=True, **extra)
        assert alone == {"recall@1": full["recall@1"], "recall@4": full["recall@4"]}
    with pytest.raises(ValueError, match="every query label is alone"):
        retrieval_metrics(embeddings[:3], np.arange(3), ks=(1,), recall_only=True)


def test_each_querys_recall_at_1_hit_is_whether_its_nearest_item_shares_its_label():
    """By hand, on the circle (no ties): 0 deg finds 12 (its class); 12 finds 20 and 20 finds 12 (other classes); 100
    and 110 find each other; 200 finds 110 and 300 finds 0 (other classes)."""
    from fdsml.evaluation.retrieval import retrieval_scores

    angles = np.radians([0.0, 12.0, 20.0, 100.0, 110.0, 200.0, 300.0])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    metrics, hits = retrieval_scores(vectors, np.array([0, 0, 1, 1, 1, 2, 2]), ks=(1,), seed=0)
    assert hits.tolist() == [True, False, False, True, True, False, False] and metrics["recall@1"] == pytest.approx(3 / 7)


def test_embeddings_that_are_not_a_non_empty_table_or_disagree_in_width_are_refused_in_full():
    for embeddings in (np.zeros(5), np.zeros((0, 3))):
        with pytest.raises(ValueError) as refused:
            retrieval_metrics(embeddings, np.arange(len(embeddings)), ks=(1,))
        assert str(refused.value) == f"embeddings: expected a non-empty (N, D) array, got shape {embeddings.shape}"
    with pytest.raises(ValueError) as refused:
        retrieval_metrics(np.zeros((3, 2)), np.arange(3), ks=(1,), query_embeddings=np.zeros((2, 5, 1)), query_labels=np.arange(2))
    assert str(refused.value) == "query_embeddings: expected a non-empty (N, D) array, got shape (2, 5, 1)"
    with pytest.raises(ValueError) as refused:
        retrieval_metrics(np.zeros((3, 2)), np.arange(3), ks=(1,), query_embeddings=np.zeros((2, 3)), query_labels=np.arange(2))
    assert str(refused.value) == "query embeddings have 3 dimensions, gallery embeddings 2"
