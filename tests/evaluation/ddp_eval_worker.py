"""A replica of a two-process gloo evaluation, spawned by test_embedding: embed, score, fail (on rank 0, then while
embedding on rank 1), and save what it saw."""

import os

import torch


class FailingFrom(torch.utils.data.Dataset):
    """``dataset`` whose items from ``first`` on cannot be read."""

    def __init__(self, dataset, first: int):
        self.dataset, self.first = dataset, first

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        if index >= self.first:
            raise OSError(f"image {index} is unreadable")
        return self.dataset[index]


def evaluate_as_replica(rank: int, world_size: int, port: int, folder: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    torch.set_num_threads(1)
    import fdsml.evaluation.embedding as embedding
    from fdsml.evaluation.classification import classification_metrics
    from fdsml.evaluation.frozen_probe import frozen_probe
    from fdsml import distributed

    from tests.support import replica_images, tiny_classifier, tiny_embedding_model, two_kinds_of_image

    calls = []
    scored_once = embedding.retrieval_scores

    def counting(*args, **kwargs):
        calls.append(distributed.current().rank)
        return scored_once(*args, **kwargs)

    embedding.retrieval_scores = counting
    outputs = embedding.model_outputs(tiny_classifier(), replica_images(), batch_size=2)
    probe = frozen_probe(tiny_embedding_model(), two_kinds_of_image(), image_size=16, crop_fraction=1.0, batch_size=3)
    top = classification_metrics(tiny_classifier(), replica_images(), batch_size=3)
    try:
        distributed.on_main_rank(lambda: 1 / 0, distributed.current())
        failure = None
    except Exception as error:  # what each replica raises when rank 0 fails
        failure = f"{type(error).__name__}: {error}"
    try:  # items 4-6 are rank 1's share: only rank 1 fails while embedding
        embedding.model_outputs(tiny_classifier(), FailingFrom(replica_images(), 4), batch_size=2)
        embedding_failure = None
    except Exception as error:
        embedding_failure = f"{type(error).__name__}: {error}"
    torch.save(
        {"outputs": outputs, "probe": probe, "calls": calls, "top": top, "failure": failure, "embedding_failure": embedding_failure},
        f"{folder}/rank{rank}.pt",
    )
    torch.distributed.destroy_process_group()
