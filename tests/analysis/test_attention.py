"""CLS-to-patch attention recomputed from the qkv projection: shapes, normalisation, and agreement with timm."""

import numpy as np
import torch

from fdsml.analysis.attention import attention_probabilities, cls_to_patch_maps, vit_cls_maps
from fdsml.models import build_model


def tiny_vit():
    torch.manual_seed(0)
    return build_model("vit_tiny_patch4", img_size=16, depth=2).eval()  # 4 x 4 patches + CLS, 3 heads


def test_probabilities_have_one_matrix_per_block_and_head_and_sum_to_one():
    model = tiny_vit()
    images = torch.rand(3, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    probabilities = attention_probabilities(model, images)
    assert probabilities.shape == (2, 3, 3, 17, 17)
    assert (probabilities >= 0).all()
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-5)
    maps = cls_to_patch_maps(probabilities, num_prefix_tokens=1, grid=(4, 4))
    assert maps.shape == (2, 3, 3, 4, 4)
    np.testing.assert_allclose(maps.reshape(2, 3, 3, 16), probabilities[:, :, :, 0, 1:])
    assert vit_cls_maps(model, images).shape == (2, 3, 4, 4)


def test_the_probabilities_reproduce_each_blocks_attention_output():
    """Weighting the values by our probabilities and projecting gives what timm's (fused) attention returned."""
    model = tiny_vit()
    images = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    inputs, outputs = [], []

    def record(module, args, out):
        inputs.append(args[0])
        outputs.append(out)

    hooks = [block.attn.register_forward_hook(record) for block in model.backbone.blocks]
    probabilities = torch.from_numpy(attention_probabilities(model, images))
    for hook in hooks:
        hook.remove()
    for index, block in enumerate(model.backbone.blocks):
        attention = block.attn
        tokens = inputs[index]
        batch, n, _ = tokens.shape
        with torch.inference_mode():
            qkv = attention.qkv(tokens).reshape(batch, n, 3, attention.num_heads, attention.head_dim)
            mixed = (probabilities[index] @ qkv[:, :, 2].transpose(1, 2)).transpose(1, 2).reshape(batch, n, -1)
            torch.testing.assert_close(attention.proj(mixed), outputs[index], atol=1e-5, rtol=1e-4)
