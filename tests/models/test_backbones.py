"""Backbones: registry, embedding/classifier heads, rebuildable configuration."""

import pytest
import torch
from torch import nn

from fdsml.config import ConfigError
from fdsml.models import MODEL_REGISTRY, BackboneRecipe, build_model, register_backbone
from fdsml.models.backbones import backbone_family
from fdsml.training.pretrain import parse_pretrain_params


def test_resnet18_embeds_small_images():
    model = build_model("resnet18", img_size=32).eval()
    with torch.no_grad():
        out = model(torch.rand(2, 3, 32, 32))
    assert out.shape == (2, 128)
    assert isinstance(model.head, nn.Linear) and model.head.in_features == 512


def test_small_vit_embeds_32px_images_through_its_mlp_head():
    model = build_model("vit_tiny_patch4", img_size=32, depth=2, embedding_dim=16).eval()
    with torch.no_grad():
        out = model(torch.rand(2, 3, 32, 32))
    assert out.shape == (2, 16)
    assert model.backbone.patch_embed.patch_size == (4, 4)
    assert len(model.backbone.blocks) == 2


def test_classifier_head_gives_logits_and_grey_input_works():
    model = build_model("resnet18", head="classifier", num_classes=7, in_chans=1).eval()
    with torch.no_grad():
        assert model(torch.rand(2, 1, 32, 32)).shape == (2, 7)


def _on_meta(name, **kwargs):
    with torch.device("meta"):
        return build_model(name, **kwargs)


def test_resnet50_classifier_becomes_a_512d_linear_embedding():
    model = _on_meta("resnet50")
    assert isinstance(model.head, nn.Linear)
    assert (model.head.in_features, model.head.out_features) == (2048, 512)


@pytest.mark.parametrize(("name", "width", "hidden", "out"), [
    ("vit_tiny_patch16_224", 192, 192, 128),
    ("vit_base_patch16_224", 768, 768, 256),
])
def test_vits_get_the_two_layer_mlp_projection(name, width, hidden, out):
    model = _on_meta(name)
    kinds = [type(layer) for layer in model.head]
    assert kinds == [nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Linear]
    assert (model.head[0].in_features, model.head[0].out_features) == (width, hidden)
    assert (model.head[3].in_features, model.head[3].out_features) == (hidden, out)


def test_config_is_plain_and_rebuilds_the_same_architecture():
    model = build_model("vit_tiny_patch4", img_size=48, patch_size=8, depth=1)
    config = model.config
    assert config == {
        "name": "vit_tiny_patch4", "head": "embedding", "num_classes": None, "embedding_dim": 128,
        "hidden_dim": 192, "img_size": 48, "in_chans": 3, "patch_size": 8, "depth": 1,
        "input_mean": [0.485, 0.456, 0.406], "input_std": [0.229, 0.224, 0.225],
    }
    rebuilt = build_model(**config)
    assert rebuilt.config == config
    assert [p.shape for p in rebuilt.state_dict().values()] == [p.shape for p in model.state_dict().values()]


def test_unknown_backbone_names_the_closest_accepted_ones():
    with pytest.raises(ValueError, match=r"unknown backbone 'resnet51'; .*timm.list_models\(\).*the closest: .*resnet50"):
        build_model("resnet51")
    with pytest.raises(ConfigError, match=r"pretrain.model.backbone: unknown backbone 'convnext_ato'.*the closest: convnext_atto"):
        parse_pretrain_params({"model": {"backbone": "convnext_ato"}})


def test_any_timm_convolutional_backbone_gets_a_linear_head_on_its_own_width():
    model = build_model("convnext_atto", img_size=32, embedding_dim=16).eval()
    with torch.no_grad():
        assert model(torch.rand(2, 3, 32, 32)).shape == (2, 16)
    assert model.num_features == 320 and isinstance(model.head, nn.Linear) and model.head.in_features == 320
    assert backbone_family("convnext_atto") == "convolutional" and backbone_family("resnet18") == "convolutional"
    assert model.spec.img_size == 32 and build_model("convnext_atto").spec.img_size == 224  # timm's usual size by default


def test_any_timm_vision_transformer_gets_its_img_size_and_an_mlp_head_on_its_own_width():
    model = build_model("deit_tiny_patch16_224", img_size=32, patch_size=8, depth=1, embedding_dim=16).eval()
    with torch.no_grad():
        assert model(torch.rand(2, 3, 32, 32)).shape == (2, 16)
    assert model.backbone.patch_embed.img_size == (32, 32)  # ViTs fix their input size at creation
    assert model.head[0].in_features == model.head[0].out_features == model.num_features == 192
    assert backbone_family("deit_tiny_patch16_224") == "transformer" and backbone_family("vit_tiny_patch4") == "transformer"
    rebuilt = build_model(**model.config)
    assert [p.shape for p in rebuilt.state_dict().values()] == [p.shape for p in model.state_dict().values()]
    with pytest.raises(ValueError, match=r"timm cannot build deit_tiny_patch16_224 with img_size 32.*'num_heads': 5.*divisible"):
        build_model("deit_tiny_patch16_224", img_size=32, patch_size=8, depth=1, num_heads=5)


def test_bad_head_choices_fail_clearly():
    with pytest.raises(ValueError, match="unknown head"):
        build_model("resnet18", head="proxy")
    with pytest.raises(ValueError, match="num_classes"):
        build_model("resnet18", head="classifier")


def test_a_new_backbone_is_one_registered_recipe():
    @register_backbone("test_resnet10t")
    def resnet10t():
        return BackboneRecipe("resnet10t", projection="linear", embedding_dim=8)

    try:
        model = build_model("test_resnet10t").eval()
        with torch.no_grad():
            assert model(torch.rand(1, 3, 32, 32)).shape == (1, 8)
        with pytest.raises(ValueError, match="already registered"):
            register_backbone("test_resnet10t")(resnet10t)
    finally:
        del MODEL_REGISTRY["test_resnet10t"]
