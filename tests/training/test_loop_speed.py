"""GPU speed features of the loop that the CPU can check: deferred device reads, decay groups, compile."""

import pytest
import torch

from fdsml.config import ConfigError
from fdsml.models import build_model
from fdsml import distributed
from fdsml.training.optimizer import build_optimizer
from fdsml.training.loop_config import OptimizerConfig
from fdsml.training.objectives import CrossEntropyObjective
from fdsml.training.pretrain import parse_pretrain_params, pretrain

from tests.support import TINY_SPEC
from .helpers import tiny_config


def test_history_is_read_from_the_device_once_per_log_interval(tiny_table, tmp_path, monkeypatch):
    reads = []
    mean = distributed.mean_across_ranks

    def counted(value, context):
        reads.append(value.shape)
        return mean(value, context)

    monkeypatch.setattr(distributed, "mean_across_ranks", counted)
    config = tiny_config(tmp_path, train={"max_steps": 6, "log_every": 3, "checkpoint_every": 100})
    _, history = pretrain(tiny_table, TINY_SPEC, config)
    assert reads == [torch.Size([3]), torch.Size([3])]  # one read of three losses per interval, not one per step
    assert history["step"].tolist() == [1, 2, 3, 4, 5, 6]
    for column in ("loss", "nonzero_fraction_same", "mining_s", "step_s", "images_per_s"):
        assert all(isinstance(value, float) for value in history[column]), column
    assert (history["mining_s"] > 0).all() and (history["mining_s"] < history["step_s"]).all()


def _decay_by_name(model, optimizer):
    by_id = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
    return {name: by_id[id(p)] for name, p in model.named_parameters()}


def test_adamw_keeps_norms_biases_position_embeddings_and_class_token_out_of_weight_decay():
    model = build_model("vit_tiny_patch4", embedding_dim=8, img_size=32)
    optimizer = build_optimizer(model, CrossEntropyObjective(), OptimizerConfig(name="adamw", weight_decay=0.05), 1e-3)
    decay = _decay_by_name(model, optimizer)
    exempt = {name for name, value in decay.items() if value == 0.0}
    assert "backbone.pos_embed" in exempt and "backbone.cls_token" in exempt
    assert "backbone.blocks.0.norm1.weight" in exempt and "backbone.blocks.0.attn.qkv.bias" in exempt
    assert {name for name, value in decay.items() if value == 0.05} >= {"backbone.blocks.0.attn.qkv.weight", "backbone.patch_embed.proj.weight"}
    assert all(name in exempt for name, p in model.named_parameters() if p.ndim <= 1)
    trunk_groups = [group for group in optimizer.param_groups if group["trunk"]]
    assert {id(p) for group in trunk_groups for p in group["params"]} == {id(p) for p in model.backbone.parameters()}


def test_sgd_decays_every_parameter():
    model = build_model("resnet18", embedding_dim=8)
    optimizer = build_optimizer(model, CrossEntropyObjective(), OptimizerConfig(name="sgd", weight_decay=1e-4), 0.1)
    assert set(_decay_by_name(model, optimizer).values()) == {1e-4}


def test_compile_is_a_validated_switch_off_by_default(tmp_path):
    assert tiny_config(tmp_path).train.compile is False
    with pytest.raises(ConfigError, match="pretrain.train.compile"):
        parse_pretrain_params({"train": {"compile": "yes"}})
