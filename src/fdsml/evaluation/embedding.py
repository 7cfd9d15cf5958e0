"""A model's outputs over a dataset, the one embedding loop of every evaluation (retrieval,
classification, robustness, the frozen probe), and the scoring of retrieval splits with it.

Built to evaluate at scale: images load in ``workers`` DataLoader processes, the trunk runs
under bf16 autocast where the device computes bf16 natively (CUDA, a CPU with AVX512-BF16 or AMX:
:mod:`fdsml.native_bf16`) and the head in float32 (outputs come back in float32), and under DDP every replica embeds
only its contiguous share of the dataset; rank 0 gathers the shares in the dataset's order and
alone computes the metrics (faiss, k-means), which every replica then receives.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from fdsml.data import ImageRecords, RetrievalSplits
from fdsml.evaluation.retrieval import retrieval_scores
from fdsml import distributed
from fdsml.native_bf16 import device_has_bf16


@torch.inference_mode()
def model_outputs(
    model: nn.Module,
    dataset: Dataset,
    *,
    batch_size: int = 256,
    device: str | torch.device = "cpu",
    workers: int = 0,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The model's outputs (logits or embeddings, N x D, float32) over ``dataset`` in order, and the labels, on the CPU.

    Under DDP each replica embeds its share and only rank 0 gets the whole (the other ranks get
    None): score it with :func:`fdsml.distributed.on_main_rank`. A replica failing to
    embed makes every replica raise, naming it. ``workers``: DataLoader processes loading the
    images (0: the main process).
    """
    if workers < 0:
        raise ValueError(f"workers: must be >= 0 DataLoader processes, got {workers}")
    if len(dataset) == 0:  # every replica knows: none is left waiting for the others
        raise ValueError("no images to embed: the dataset is empty")
    device = torch.device(device)
    context = distributed.current(device)
    share = distributed.shard(len(dataset), context)

    def embed_share() -> tuple[torch.Tensor, torch.Tensor] | None:
        return _outputs(model, Subset(dataset, share), batch_size, device, workers) if len(share) else None

    shares = [part for part in distributed.gather_results(embed_share, context) or [] if part is not None]
    if not context.is_main:
        return None
    return torch.cat([outputs for outputs, _ in shares]), torch.cat([labels for _, labels in shares])


def _outputs(
    model: nn.Module, dataset: Dataset, batch_size: int, device: torch.device, workers: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """This process's outputs (float32, CPU) and labels over ``dataset``, in order."""
    model.eval().to(device)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=workers, pin_memory=device.type == "cuda")
    outputs, labels = [], []
    for batch in loader:
        outputs.append(_forward(model, batch["image"].to(device, non_blocking=True)).cpu())
        labels.append(batch["label"])
    return torch.cat(outputs), torch.cat(labels)


def trunk_autocast(device: torch.device) -> torch.autocast:
    """The autocast every evaluation runs a trunk under: bf16 where ``device`` computes it natively, off elsewhere.

    The same on every device and whatever precision the model trained in, so runs are scored alike; a trunk's
    features in bf16 move the held-out ordering agreement by at most 0.0012 and the probe's Recall@1 not at all
    (docs/cpu.md, evaluation in bf16)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device_has_bf16(device))


def _forward(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The model's outputs in float32: its trunk (``features``) under :func:`trunk_autocast`, its ``head`` in float32
    on the float32 features, so that near ties between embeddings do not flip on bf16 rounding; a model
    without the two parts runs whole under it."""
    with trunk_autocast(images.device):
        if not (hasattr(model, "features") and hasattr(model, "head")):
            return model(images).float()
        features = model.features(images)
    return model.head(features.float()).float()


def retrieval_split_metrics(
    embed: Callable[[ImageRecords], np.ndarray | None], splits: RetrievalSplits, *, seed: int = 0, threads: int | None = None
) -> dict[str, float]:
    """Retrieval metrics of the test classes (or the queries against the gallery), the same on every replica.

    ``embed`` maps records to their embeddings in order (None off rank 0, as :func:`model_outputs`);
    rank 0 computes the metrics with faiss on ``threads`` threads while the others wait.
    """
    return retrieval_split_scores(embed, splits, seed=seed, threads=threads)[0]


def retrieval_split_scores(
    embed: Callable[[ImageRecords], np.ndarray | None], splits: RetrievalSplits, *, seed: int = 0, threads: int | None = None
) -> tuple[dict[str, float], np.ndarray]:
    """:func:`retrieval_split_metrics` and each scored query's Recall@1 hit (:func:`~fdsml.evaluation.retrieval.retrieval_scores`)."""
    context = distributed.current()
    if splits.has_query_set:
        gallery, queries = embed(splits.gallery), embed(splits.query)
        return distributed.on_main_rank(
            lambda: retrieval_scores(
                gallery,
                splits.gallery.labels,
                ks=splits.ks,
                query_embeddings=queries,
                query_labels=splits.query.labels,
                seed=seed,
                threads=threads,
            ),
            context,
        )
    test = embed(splits.test)
    return distributed.on_main_rank(
        lambda: retrieval_scores(test, splits.test.labels, ks=splits.ks, seed=seed, threads=threads), context
    )
