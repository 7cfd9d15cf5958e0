"""The proxy-loss registry: by name, in the losses package, every entry computed in float32."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pytorch_metric_learning.losses import NormalizedSoftmaxLoss, ProxyAnchorLoss

import fdsml
from fdsml.config import ConfigError
from fdsml.losses import proxy


def test_a_loss_is_built_by_name_and_stays_the_library_class():
    loss = proxy.build_proxy_loss("proxy_anchor", 3, 8, margin=0.2)
    assert isinstance(loss, ProxyAnchorLoss) and loss.proxies.shape == (3, 8) and loss.margin == 0.2
    with pytest.raises(ValueError, match="unknown proxy loss 'arcface'; choose one of proxy_anchor, proxy_nca"):
        proxy.build_proxy_loss("arcface", 3, 8)


SET_BY_FDSML = {"num_classes": "the training classes' count", "embedding_size": "retrieval.embedding.embedding_dim"}


def test_a_loss_option_the_loss_takes_passes_the_check():
    proxy.PROXY_LOSSES.check_options("proxy_anchor", {"margin": 0.2, "alpha": 16}, "options", SET_BY_FDSML)
    proxy.PROXY_LOSSES.check_options("proxy_anchor", {"num_classes": 3}, "options")  # nothing set by fdsml here


def test_an_option_fdsml_sets_is_refused_naming_what_sets_it():
    with pytest.raises(ConfigError, match=r"^options\.embedding_size: fdsml sets it from retrieval\.embedding\.embedding_dim; remove it$"):
        proxy.PROXY_LOSSES.check_options("proxy_anchor", {"margin": 0.2, "embedding_size": 8}, "options", SET_BY_FDSML)


def test_an_option_the_loss_does_not_take_is_refused_with_the_closest_and_the_ones_it_takes():
    with pytest.raises(ConfigError) as refused:
        proxy.PROXY_LOSSES.check_options("proxy_anchor", {"marign": 0.2}, "options", SET_BY_FDSML)
    message = str(refused.value)
    start, takes = message.split("; it takes ")
    assert start == "options.marign: the proxy loss proxy_anchor (ProxyAnchorLoss) takes no argument marign (did you mean margin?)"
    assert {"margin", "alpha", "reducer"} <= set(takes.split(", ")) and not {"num_classes", "embedding_size"} & set(takes.split(", "))


def test_registering_one_class_adds_a_float32_loss(monkeypatch):
    monkeypatch.setattr(proxy, "PROXY_LOSSES", copy.copy(proxy.PROXY_LOSSES))
    proxy.register_proxy_loss("normalized_softmax", NormalizedSoftmaxLoss)
    loss = proxy.build_proxy_loss("normalized_softmax", 3, 8)
    embeddings, labels = torch.randn(6, 8), torch.arange(6) % 3
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = loss(embeddings, labels)
    assert isinstance(loss, NormalizedSoftmaxLoss) and value.dtype == torch.float32
    assert value.item() == pytest.approx(loss(embeddings, labels).item(), rel=1e-6)


def test_the_losses_package_does_not_import_the_training_package():
    code = "import sys, fdsml.losses.couce; print(sorted(m for m in sys.modules if m.startswith('fdsml.training')))"
    env = {**os.environ, "PYTHONPATH": str(Path(fdsml.__file__).parents[1])}
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert imported.strip() == "[]"
