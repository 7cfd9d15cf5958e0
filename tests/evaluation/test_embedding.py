"""One embedding loop for every evaluation: DataLoader workers, and under DDP a share per replica,
gathered on rank 0 in the dataset's order, with the metrics computed once and handed to every replica."""

import time

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

import fdsml.evaluation.embedding as embedding
from fdsml import native_bf16
from fdsml.data import ImageRecordsDataset, ImageTransform
from fdsml.evaluation.classification import classification_metrics
from fdsml.evaluation.frozen_probe import frozen_probe
from fdsml.distributed import DistContext, shard
from tests.servers import free_port
from tests.support import REPLICA_IMAGES, replica_images, tiny_classifier, tiny_embedding_model, two_kinds_of_image

from .ddp_eval_worker import evaluate_as_replica

REPLICAS_DEADLINE_S = 300


def test_shares_are_contiguous_cover_every_item_once_and_may_be_empty():
    assert [shard(7, DistContext(torch.device("cpu"), rank, 2)) for rank in range(2)] == [range(0, 4), range(4, 7)]
    assert [list(shard(1, DistContext(torch.device("cpu"), rank, 3))) for rank in range(3)] == [[0], [], []]


def test_dataloader_workers_give_the_outputs_of_the_main_process():
    alone = embedding.model_outputs(tiny_classifier(), replica_images(), batch_size=3)
    with_workers = embedding.model_outputs(tiny_classifier(), replica_images(), batch_size=3, workers=2)
    assert torch.equal(alone[0], with_workers[0]) and torch.equal(alone[1], with_workers[1])
    assert alone[0].dtype == torch.float32 and alone[0].shape == (REPLICA_IMAGES, 3)


@pytest.mark.parametrize("native", [True, False])
def test_where_the_cpu_computes_bf16_the_trunk_runs_under_autocast_and_the_head_in_float32(monkeypatch, native):
    """As on CUDA: near ties must not flip on bf16 rounding in the head; a CPU without native bf16 embeds in float32."""
    monkeypatch.setattr(native_bf16, "cpu_has_native_bf16", lambda: native)
    model = tiny_embedding_model().eval()
    seen = {}
    model.backbone.register_forward_hook(lambda module, inputs, output: seen.update(trunk=output.dtype))
    model.head.register_forward_pre_hook(lambda module, inputs: seen.update(head=inputs[0].dtype))
    dataset = ImageRecordsDataset(replica_images().records, ImageTransform(16, crop_fraction=1.0))
    outputs, _ = embedding.model_outputs(model, dataset, batch_size=4)
    assert seen == {"trunk": torch.bfloat16 if native else torch.float32, "head": torch.float32}
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=native):
        features = model.features(torch.stack([dataset[i]["image"] for i in range(REPLICA_IMAGES)]))
    with torch.no_grad():
        torch.testing.assert_close(outputs, model.head(features.float()), rtol=0, atol=0)


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    """What each of two gloo replicas saw: outputs, the frozen probe's metrics and who computed them, top-k, a failure."""
    folder = tmp_path_factory.mktemp("replicas")
    processes = mp.spawn(evaluate_as_replica, args=(2, free_port(), str(folder)), nprocs=2, join=False)
    deadline = time.monotonic() + REPLICAS_DEADLINE_S
    while not processes.join(timeout=1):
        if time.monotonic() > deadline:  # a replica left waiting in a collective would otherwise wait for hours
            for process in processes.processes:
                process.kill()
            pytest.fail(f"the replicas did not finish within {REPLICAS_DEADLINE_S} s: one is waiting for another")
    return [torch.load(folder / f"rank{rank}.pt", weights_only=False) for rank in range(2)]


def test_rank_0_gathers_the_shares_in_the_order_of_one_process(replicas):
    outputs, labels = embedding.model_outputs(tiny_classifier(), replica_images(), batch_size=2)
    gathered, gathered_labels = replicas[0]["outputs"]
    assert torch.equal(gathered_labels, labels)
    torch.testing.assert_close(gathered, outputs, rtol=1e-5, atol=1e-6)
    assert replicas[1]["outputs"] is None, "the other ranks hold no copy of the whole"


def test_retrieval_metrics_are_computed_once_by_rank_0_and_every_replica_returns_them(replicas):
    assert replicas[0]["calls"] == [0] and replicas[1]["calls"] == []
    alone = frozen_probe(tiny_embedding_model(), two_kinds_of_image(), image_size=16, crop_fraction=1.0, batch_size=3)
    assert replicas[0]["probe"] == replicas[1]["probe"]
    assert replicas[0]["probe"] == pytest.approx(alone, abs=1e-9)


def test_classification_scores_are_the_same_on_every_replica_and_as_in_one_process(replicas):
    assert replicas[0]["top"] == replicas[1]["top"] == classification_metrics(tiny_classifier(), replica_images(), batch_size=3)


def test_a_failure_on_rank_0_reaches_every_replica_instead_of_leaving_it_waiting(replicas):
    assert replicas[0]["failure"] == "ZeroDivisionError: division by zero"
    assert replicas[1]["failure"] == "RuntimeError: rank 0 failed while computing for every replica: ZeroDivisionError: division by zero"


def test_a_replica_failing_to_embed_makes_every_replica_raise_instead_of_waiting_in_the_gather(replicas):
    assert replicas[1]["embedding_failure"] == "OSError: image 4 is unreadable"
    assert replicas[0]["embedding_failure"] == "RuntimeError: rank 1 failed: OSError: image 4 is unreadable"


def test_a_query_set_is_searched_against_its_gallery_and_a_test_set_against_itself():
    """The split's parts reach the metric in their roles: the queries search the gallery (not the other way round, not
    the gallery itself), a test set searches itself; the seed and the thread count are the caller's."""
    from fdsml.data import ImageRecords, RetrievalSplits
    from fdsml.evaluation.retrieval import retrieval_scores

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(30, 4)).astype(np.float32)
    labels = np.repeat(np.arange(10), 3)
    records = lambda rows: ImageRecords(labels=labels[rows], images=np.asarray(rows, dtype=np.uint8)[:, None, None])
    embed = lambda part: vectors[part.images[:, 0, 0]]  # each image's vector, read off its one pixel
    gallery, query = np.arange(0, 30, 3), np.setdiff1d(np.arange(30), np.arange(0, 30, 3))
    split = RetrievalSplits("toy", records(gallery), (1, 2), query=records(query), gallery=records(gallery))
    found = embedding.retrieval_split_metrics(embed, split, seed=3, threads=1)
    expected = retrieval_scores(vectors[gallery], labels[gallery], ks=(1, 2), query_embeddings=vectors[query], query_labels=labels[query], seed=3)[0]
    swapped = retrieval_scores(vectors[query], labels[query], ks=(1, 2), query_embeddings=vectors[gallery], query_labels=labels[gallery], seed=3)[0]
    assert found == expected and found != swapped
    whole = RetrievalSplits("toy", records(gallery), (1, 2), test=records(np.arange(30)))
    assert embedding.retrieval_split_metrics(embed, whole, seed=3) == retrieval_scores(vectors, labels, ks=(1, 2), seed=3)[0]


def test_an_empty_dataset_or_negative_workers_are_refused_by_name():
    with pytest.raises(ValueError, match="^workers: must be >= 0 DataLoader processes, got -1$"):
        embedding.model_outputs(tiny_classifier(), replica_images(), workers=-1)
    with pytest.raises(ValueError, match="^no images to embed: the dataset is empty$"):
        embedding.model_outputs(tiny_classifier(), torch.utils.data.Subset(replica_images(), []))
