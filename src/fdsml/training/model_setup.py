"""The model as the training steps see it: BatchNorm frozen or synchronised, placed on the device, wrapped in
DDP across replicas and compiled when asked (:func:`fdsml.training.loop.train` calls these in order)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fdsml import distributed
from fdsml.config import ConfigError
from fdsml.training.loop_config import LoopConfig
from fdsml.training.precision import Precision


def freeze_batchnorm(model: nn.Module) -> None:
    """Keep every BatchNorm layer on its stored statistics (eval mode) while the rest trains."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()


def compute_head_in(model: nn.Module, computes_in: Precision) -> None:
    """Have ``model`` compute its head in ``computes_in``'s head precision (float32: on its trunk's features cast to
    float32, autocast off). A model without a separate head (no ``float32_head``: not an
    :class:`~fdsml.models.EmbeddingModel`) runs whole in its trunk's precision."""
    if hasattr(model, "float32_head"):
        model.float32_head = computes_in.float32_head


def synchronised_batchnorm(model: nn.Module, loop: LoopConfig, context: distributed.DistContext) -> nn.Module:
    """``model`` with every BatchNorm a SyncBatchNorm when ``sync_batchnorm`` is on under DDP (same weights and keys)."""
    if not (loop.sync_batchnorm and context.distributed):
        return model
    if context.device.type != "cuda":
        raise ConfigError("train.sync_batchnorm: torch's SyncBatchNorm runs on CUDA devices only; set it false for CPU replicas")
    return nn.SyncBatchNorm.convert_sync_batchnorm(model)


def prepare_model(model: nn.Module, loop: LoopConfig, context: distributed.DistContext) -> nn.Module:
    """``model`` ready to wrap: BatchNorm synchronised if asked, on the context's device, channels-last on CUDA."""
    model = synchronised_batchnorm(model, loop, context)
    model.to(context.device)
    if loop.channels_last and context.device.type == "cuda":
        model.to(memory_format=torch.channels_last)
    return model


def wrap_model(model: nn.Module, loop: LoopConfig, context: distributed.DistContext) -> nn.Module:
    """``model`` as the steps call it: in DDP across replicas, compiled through ``torch.compile`` when asked."""
    wrapped = (
        DistributedDataParallel(
            model,
            device_ids=[context.device] if context.device.type == "cuda" else None,
            broadcast_buffers=False,  # BatchNorm statistics go from rank 0 to every replica at the end (broadcast_buffers)
            gradient_as_bucket_view=True,  # gradients live in DDP's all-reduce buckets: no copy per step
        )
        if context.distributed
        else model
    )
    return torch.compile(wrapped) if loop.compile else wrapped
