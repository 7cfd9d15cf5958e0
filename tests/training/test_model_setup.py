"""The model as training sees it: convolutions torch's CPU bf16 kernels get wrong compute in float32.

The flaky case (tests/training/test_classification.py's fine-tuning from a checkpoint trunk) was a
ResNet-18 at 16 px in bf16 on a CPU with native bf16: ``layer4.0.conv1`` (3 x 3, stride 2) sees a
1 x 1 map, and oneDNN's bf16 weight gradient for it is uninitialised memory in most calls.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fdsml.models import build_model
from fdsml.training.model_setup import Float32WhereCpuBf16Fails, narrower_than_stride

REPEATS = 20  # unguarded, at least one of these is wrong with probability above 0.999 on an AVX512-BF16 CPU


def weight_gradient(conv: nn.Conv2d, image: torch.Tensor, upstream: torch.Tensor) -> torch.Tensor:
    conv.weight.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = conv(image)
    output.backward(upstream.to(output.dtype))
    return conv.weight.grad


@pytest.mark.parametrize("size, stride", [(1, 2), (2, 3), (3, 4)])
def test_a_convolution_narrower_than_its_stride_gets_its_true_weight_gradient_in_bf16(size, stride):
    torch.manual_seed(0)
    conv = nn.Conv2d(64, 128, 3, stride=stride, padding=1, bias=False)
    Float32WhereCpuBf16Fails().install(conv)
    image = torch.randn(4, 64, size, size).bfloat16()  # as a bf16 layer before it hands it on
    upstream = torch.randn(4, 128, 1, 1)
    truth = torch.nn.grad.conv2d_weight(image.double(), conv.weight.shape, upstream.double(), stride=stride, padding=1)
    for _ in range(REPEATS):
        torch.testing.assert_close(weight_gradient(conv, image, upstream).double(), truth, rtol=1e-4, atol=1e-5)


def test_other_convolutions_keep_bf16_and_autocast_comes_back_after_a_float32_one():
    wide, narrow = nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.Conv2d(8, 8, 3, stride=2, padding=1)
    guard = Float32WhereCpuBf16Fails()
    guard.install(wide), guard.install(narrow)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert wide(torch.rand(1, 8, 4, 4)).dtype == torch.bfloat16
        assert narrow(torch.rand(1, 8, 1, 1)).dtype == torch.float32
        assert torch.is_autocast_enabled("cpu") and wide(torch.rand(1, 8, 4, 4)).dtype == torch.bfloat16
    assert narrow(torch.rand(1, 8, 1, 1)).dtype == torch.float32  # outside autocast nothing changes


def test_narrower_than_stride_reads_each_strided_axis():
    assert narrower_than_stride((1, 1), (2, 2)) and narrower_than_stride((4, 1), (2, 2)) and narrower_than_stride((2, 2), (3, 3))
    assert not narrower_than_stride((2, 2), (2, 2)) and not narrower_than_stride((1, 1), (1, 1))


def test_a_16_px_resnet18_trains_layer4_on_its_true_gradient_in_bf16():
    """The flaky case itself, repeated: layer4.0.conv1's weight gradient is the one its input and upstream gradient give."""
    from fdsml import distributed
    from fdsml.training.loop_config import LoopConfig
    from fdsml.training.model_setup import cpu_bf16_guard, prepare_model

    torch.manual_seed(0)
    model = build_model("resnet18", embedding_dim=8, img_size=16)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):  # timm zero-initialises each block's last BatchNorm: no gradient reaches conv1
            nn.init.uniform_(module.weight, 0.5, 1.5)
    with cpu_bf16_guard(prepare_model(model, LoopConfig(device="cpu"), distributed.setup("cpu")), torch.device("cpu")):  # as the loop trains
        conv, seen = model.backbone.layer4[0].conv1, {}

        def keep(module, args, output):
            seen["input"] = args[0].detach()
            output.register_hook(lambda upstream: seen.update(upstream=upstream.detach()))

        kept = conv.register_forward_hook(keep)
        images = torch.rand(4, 3, 16, 16)
        for _ in range(REPEATS):
            model.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                embedding = model(images)
            embedding.float().square().sum().backward()
            assert seen["input"].shape[-2:] == (1, 1)
            truth = torch.nn.grad.conv2d_weight(seen["input"].double(), conv.weight.shape, seen["upstream"].double(), stride=2, padding=1)
            torch.testing.assert_close(conv.weight.grad.double(), truth, rtol=1e-3, atol=1e-3 * float(truth.abs().max()))
        kept.remove()
    assert all(not module._forward_hooks and not module._forward_pre_hooks for module in model.modules())  # gone with the training