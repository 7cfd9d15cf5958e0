"""The model as the training steps see it: BatchNorm frozen or synchronised, placed on the device, wrapped in
DDP across replicas and compiled when asked (:func:`fdsml.training.loop.train` calls these in order)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

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


def narrower_than_stride(image_size: Sequence[int], stride: Sequence[int]) -> bool:
    """Whether a convolution's input is smaller than its stride along a strided axis (it has one output there)."""
    return any(step > 1 and size < step for size, step in zip(image_size, stride))


class Float32WhereCpuBf16Fails:
    """Forward hooks that compute a strided convolution narrower than its stride in float32 under CPU bf16 autocast.

    torch 2.14's oneDNN (3.12, ``jit_bf16:avx512_core_bf16``) returns uninitialised memory as the weight
    gradient of a bf16 convolution whose input is narrower than its stride: a ResNet-18 at 16 px, whose
    ``layer4.0.conv1`` (3 x 3, stride 2) sees a 1 x 1 map, got gradients up to 1e36 where 1e-16 is right, in
    about one step in five (the forward, the input's gradient and float32 are right). Such a convolution has one
    output per row or column, so float32 there costs nothing; every other convolution keeps bf16.
    """

    def __init__(self):
        self.paused: dict[nn.Module, torch.autocast] = {}

    def before(self, module: nn.Conv2d, args: tuple) -> tuple | None:
        image = args[0]
        if not (torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16):
            return None
        if not narrower_than_stride(image.shape[-2:], module.stride):
            return None
        self.paused[module] = torch.autocast("cpu", enabled=False)
        self.paused[module].__enter__()
        return (image.float(), *args[1:])

    def after(self, module: nn.Conv2d, args: tuple, output: torch.Tensor) -> None:
        if module in self.paused:
            self.paused.pop(module).__exit__(None, None, None)

    def install(self, model: nn.Module) -> list[torch.utils.hooks.RemovableHandle]:
        """Its hooks on every convolution of ``model``; the handles that remove them."""
        handles = []
        for module in model.modules():
            if isinstance(module, nn.Conv2d):
                handles += [module.register_forward_pre_hook(self.before), module.register_forward_hook(self.after)]
        return handles


@contextmanager
def cpu_bf16_guard(model: nn.Module, device: torch.device):
    """While training on a CPU, the convolutions its bf16 kernels get wrong compute in float32
    (:class:`Float32WhereCpuBf16Fails`); the hooks leave with the training, so the model it returns is a plain one."""
    handles = Float32WhereCpuBf16Fails().install(model) if device.type == "cpu" else []
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


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
