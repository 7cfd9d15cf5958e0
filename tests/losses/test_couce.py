"""CouCE (docs/method.md §7): each formula against a hand computation, gradient routing, zero inference overhead."""

import copy
import math
import os
from datetime import timedelta

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from pytorch_metric_learning.losses import SoftTripleLoss

from fdsml.config import ConfigError, parse
from fdsml.losses.couce import (
    MSRCI,
    CouCE,
    CouCEObjective,
    CouCESettings,
    FIFODictionary,
    ODBA,
    StageSplit,
    VarianceTracker,
    band_index,
    build_couce_objective,
    class_variances,
    decorrelation_loss,
    frequency_band_edges,
    frequency_radius,
    gather_across_ranks,
    invariance_loss,
    kl_divergence,
    orthogonality_loss,
    parse_split_point,
    project_out,
    proxy_log_probabilities,
    proxy_matrix,
    spurious_component,
    variance_gate,
)
from fdsml.losses.proxy import PROXY_LOSSES, build_proxy_loss
from fdsml.models import build_model, load_checkpoint, model_payload, save_checkpoint
from fdsml.training.loop import train
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.objectives import ProxyObjective
from fdsml.training.training_plan import PlanKeys, plan_training
from tests.servers import free_port

EMBEDDING = 16
CLASSES = 4


def tiny_resnet(seed: int = 0):
    torch.manual_seed(seed)
    return build_model("resnet18", embedding_dim=EMBEDDING, img_size=32)


def tiny_vit(seed: int = 0):
    torch.manual_seed(seed)
    return build_model("vit_tiny_patch4", img_size=32, depth=2, embedding_dim=EMBEDDING)


def tiny_batch(n: int = 8, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return {"image": torch.randn(n, 3, 32, 32, generator=generator), "label": torch.arange(n) % CLASSES}


def no_hooks_left(model) -> bool:
    return all(not module._forward_hooks and "forward" not in vars(module) for module in model.modules())


# ---------------------------------------------------------------- stage split


def split_activation(split: StageSplit, model, x: torch.Tensor) -> torch.Tensor:
    """The activation at the split point of ``model(x)`` (a forward hook, removed on return)."""
    seen = []
    handle = split.split_module.register_forward_hook(lambda module, inputs, output: seen.append(output))
    try:
        model(x)
    finally:
        handle.remove()
    return seen[0]


def intervened_forward(split: StageSplit, model, x: torch.Tensor, function) -> torch.Tensor:
    """``model(x)`` with the activation at the split point replaced by ``split.intervene(activation, function)``."""
    handle = split.split_module.register_forward_hook(lambda module, inputs, output: split.intervene(output, function))
    try:
        return model(x)
    finally:
        handle.remove()


@pytest.mark.parametrize("split_at", ["auto", "layer2", "layer3", "layer4"])
def test_resnet_splits_after_the_named_stage(split_at):
    model = tiny_resnet()
    split = StageSplit(model, split_at)
    assert split.split_module is getattr(model.backbone, "layer3" if split_at == "auto" else split_at)


@pytest.mark.parametrize("split_at", ["auto", "blocks.0", "blocks.1"])
def test_vit_tokens_map_to_the_grid(split_at):
    model, x = tiny_vit().eval(), tiny_batch()["image"]
    split = StageSplit(model, split_at)
    split.joint_forward(model, x, lambda h: h)  # learns the patch grid of x
    tokens = split_activation(split, model, x)
    grid = split.to_map(tokens)
    assert grid.shape == (8, 192, 8, 8)
    torch.testing.assert_close(grid[:, :, 1, 2], tokens[:, 1 + 1 * 8 + 2])  # row-major patch order after the CLS token
    doubled = split.intervene(tokens, lambda h: 2 * h)
    torch.testing.assert_close(doubled[:, 0], tokens[:, 0])  # CLS untouched
    torch.testing.assert_close(doubled[:, 1:], 2 * tokens[:, 1:])


def test_split_point_must_fit_the_architecture():
    with pytest.raises(ValueError, match="names ViT blocks but the trunk is a ResNet"):
        StageSplit(tiny_resnet(), "blocks.1")
    with pytest.raises(ValueError, match="names a ResNet stage but the trunk is a ViT"):
        StageSplit(tiny_vit(), "layer2")
    for past_the_last in ("blocks.2", "blocks.5"):
        with pytest.raises(ValueError, match="blocks 0..1"):
            StageSplit(tiny_vit(), past_the_last)
    with pytest.raises(ConfigError, match="'layer9' is not accepted; use auto, layer1, layer2, layer3, layer4 or blocks.<i>"):
        CouCESettings(split_at="layer9")
    trunk_of_another_kind = build_model("resnet18", embedding_dim=EMBEDDING, img_size=32)
    trunk_of_another_kind.backbone = torch.nn.Linear(3, 3)
    with pytest.raises(ValueError, match="timm ResNet and VisionTransformer trunks, not Linear"):
        StageSplit(trunk_of_another_kind)


def test_split_points_parse_to_their_kind_and_index():
    assert parse_split_point("auto") == ("auto", None)
    assert parse_split_point("layer2") == ("resnet", 1)
    assert parse_split_point("blocks.3") == ("vit", 3)


@pytest.mark.parametrize(("depth", "block"), [(1, 0), (2, 0), (8, 5), (12, 8)])
def test_a_vit_splits_by_default_after_three_quarters_of_its_blocks(depth, block):
    """Block floor(3 depth / 4) - 1 (never below 0): a ViT-B/16's 12 blocks split after block 8."""
    torch.manual_seed(0)
    model = build_model("vit_tiny_patch4", img_size=32, depth=depth, embedding_dim=EMBEDDING)
    split = StageSplit(model)
    assert split.index == block and split.split_module is model.backbone.blocks[block]


@pytest.mark.parametrize("builder", [tiny_resnet, tiny_vit])
def test_joint_forward_runs_stage2_on_clean_then_intervened_and_leaves_no_hook(builder):
    model, x = builder().eval(), tiny_batch()["image"]
    split = StageSplit(model)
    both = split.joint_forward(model, x, lambda h: 0.5 * h)
    torch.testing.assert_close(both[:8], model(x))
    torch.testing.assert_close(both[8:], intervened_forward(split, model, x, lambda h: 0.5 * h))
    assert no_hooks_left(model)


def _running_statistics(model) -> dict[str, torch.Tensor]:
    return {name: buffer for name, buffer in model.named_buffers() if "running_" in name}


@pytest.mark.parametrize("builder", [tiny_resnet, tiny_vit])
def test_a_couce_step_leaves_the_batchnorm_statistics_of_the_clean_view_alone(builder):
    """The saved (plain) model's running statistics are those a forward of the clean images alone gives."""
    model, batch = builder().train(), tiny_batch()
    clean_only, joint = copy.deepcopy(model), copy.deepcopy(model)
    objective = build_couce_objective(CouCESettings(), "proxy_anchor", CLASSES, EMBEDDING)
    loss, parts = objective(model, batch, step=0)
    loss.backward()
    expected = clean_only(batch["image"])
    statistics = _running_statistics(model)
    assert statistics and parts["inv"] > 0  # the views differ, and there are statistics to compare
    for name, value in _running_statistics(clean_only).items():
        torch.testing.assert_close(statistics[name], value, rtol=1e-5, atol=1e-6, msg=name)
    both = StageSplit(joint).joint_forward(joint, batch["image"], lambda h: 2 * h)
    assert both.shape[0] == 16
    torch.testing.assert_close(both[:8], expected, rtol=1e-5, atol=1e-6)  # the clean rows: the plain forward's
    assert no_hooks_left(model)


def test_the_intervened_view_is_normalised_by_the_clean_batch_statistics():
    """Rows the intervention leaves unchanged come out as the plain forward's (not with joint or per-view statistics)."""
    model, x = tiny_resnet().train(), tiny_batch()["image"]
    plain = copy.deepcopy(model)(x)
    both = StageSplit(model).joint_forward(model, x, lambda h: torch.where(torch.arange(8)[:, None, None, None] < 4, h, 0 * h))
    torch.testing.assert_close(both[8:12], plain[:4], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- MSRCI


def test_band_edges_follow_their_schedule():
    assert frequency_band_edges("uniform", 3) == pytest.approx((1 / 3, 2 / 3, 1.0))
    assert frequency_band_edges("linear", 3) == pytest.approx((1 / 6, 1 / 2, 1.0))
    assert frequency_band_edges("exponential", 3) == pytest.approx((1 / 7, 3 / 7, 1.0))
    assert frequency_band_edges("custom", 2, (0.3, 1.0)) == (0.3, 1.0)
    for bad in [None, (0.3,), (0.5, 0.4, 1.0), (0.2, 0.4, 0.9)]:
        with pytest.raises(ConfigError, match="band_edges"):
            frequency_band_edges("custom", 3, bad)
    with pytest.raises(ConfigError, match="band_edges"):
        frequency_band_edges("uniform", 3, (0.2, 0.4, 1.0))


def test_custom_band_edges_hold_inside_zero_to_one_strictly_increasing():
    assert frequency_band_edges("custom", 3, (0.2, 0.5, 1.0)) == (0.2, 0.5, 1.0)
    for bad in [(0.0, 0.5, 1.0), (0.3, 0.3, 1.0)]:  # an edge at 0 holds no frequency; equal edges an empty band
        with pytest.raises(ConfigError, match="must increase strictly inside"):
            frequency_band_edges("custom", 3, bad)
    with pytest.raises(ConfigError, match="'octave' is not accepted; choose one of uniform, linear, exponential, custom"):
        frequency_band_edges("octave", 3)


def test_msrci_uses_its_custom_edges_and_keeps_its_gammas_out_of_the_state_dict():
    """The gammas are settings, not state: a checkpoint of another gamma setting still loads."""
    msrci = MSRCI(gammas=(0.1, 0.2), schedule="custom", band_edges=(0.3, 1.0))
    assert msrci.edges == (0.3, 1.0)
    assert "gammas" not in msrci.state_dict() and msrci.gammas.dtype == torch.float32


def test_bands_are_concentric_rings_from_dc_to_the_corner():
    radius = frequency_radius(8, 8)
    bands = band_index(radius, (1 / 3, 2 / 3, 1.0))
    assert radius[0, 0] == 0 and radius[4, 4] == pytest.approx(1.0)  # (Nyquist, Nyquist)
    assert bands[0, 0] == 0 and bands[4, 4] == 2 and bands[0, 4] == 2  # |f| = (0, 0.5): r = 0.707
    assert bands[0, 1] == 0 and bands[0, 2] == 1  # r = 0.177, 0.354
    torch.testing.assert_close(radius, torch.roll(torch.flip(radius, (0, 1)), (1, 1), (0, 1)))  # r(f) = r(-f)


def test_msrci_changes_the_amplitude_and_keeps_the_phase():
    """Default schedule on a ResNet-50-sized 14 x 14 map; the mean amplitude change matches E|gamma dA| = gamma/2 per band."""
    h = torch.randn(16, 32, 14, 14, generator=torch.Generator().manual_seed(1))
    msrci = MSRCI()
    out = msrci(h, torch.Generator().manual_seed(2))
    assert out.shape == h.shape and out.dtype == h.dtype
    before, after = torch.fft.fft2(h.double()), torch.fft.fft2(out.double())
    phase_shift = torch.angle(after * before.conj())
    assert phase_shift.norm() / torch.angle(before).norm() < 1e-4
    relative_amplitude_change = ((after.abs() - before.abs()).abs() / before.abs()).mean().item()
    bands = band_index(frequency_radius(14, 14), msrci.edges)
    expected = sum((bands == s).float().mean().item() * g / 2 for s, g in enumerate((0.2, 0.4, 0.8)))
    assert relative_amplitude_change == pytest.approx(expected, rel=0.1)
    assert relative_amplitude_change > 0.1


def test_msrci_is_the_identity_in_eval_mode_and_seeded_by_its_generator():
    h = torch.randn(2, 3, 6, 6)
    msrci = MSRCI()
    torch.testing.assert_close(msrci(h, torch.Generator().manual_seed(0)), msrci(h, torch.Generator().manual_seed(0)))
    assert not torch.allclose(msrci(h, torch.Generator().manual_seed(0)), msrci(h, torch.Generator().manual_seed(1)))
    assert msrci.eval()(h) is h


def test_msrci_keeps_the_scale_factor_positive_for_large_gammas():
    h = torch.randn(64, 4, 6, 6, generator=torch.Generator().manual_seed(0))
    out = MSRCI(gammas=(3.0,), min_scale=0.05)(h, torch.Generator().manual_seed(0))
    factor = torch.fft.fft2(out.double()).abs() / torch.fft.fft2(h.double()).abs()
    assert factor.min() > 0.05 - 1e-4
    phase_shift = torch.angle(torch.fft.fft2(out.double()) * torch.fft.fft2(h.double()).conj())
    assert phase_shift.abs().max() < 1e-3


def test_msrci_accepts_bfloat16_maps():
    h = torch.randn(2, 3, 6, 6).bfloat16()
    assert MSRCI()(h, torch.Generator().manual_seed(0)).dtype == torch.bfloat16


# ---------------------------------------------------------------- L_inv


def _views(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    m = torch.randn(5, 6, generator=generator, requires_grad=True)
    m_tilde = torch.randn(5, 6, generator=generator, requires_grad=True)
    proxies = torch.randn(4, 6, generator=generator)
    return m, m_tilde, proxies


def test_invariance_loss_is_the_symmetric_kl_of_the_proxy_distributions():
    m, m_tilde, proxies = _views()
    p = torch.softmax(F.cosine_similarity(m[:, None], proxies[None], dim=2) / 0.1, dim=1)
    q = torch.softmax(F.cosine_similarity(m_tilde[:, None], proxies[None], dim=2) / 0.1, dim=1)
    by_hand = ((p * (p / q).log()).sum(1) + (q * (q / p).log()).sum(1)).mean()
    torch.testing.assert_close(invariance_loss(m, m_tilde, proxies, 0.1), by_hand)
    assert invariance_loss(m, m.clone(), proxies).abs() < 1e-6


def _gradients(loss, *tensors):
    return torch.autograd.grad(loss, tensors, allow_unused=True, retain_graph=True)


def test_stop_gradient_trains_each_branch_only_through_the_term_where_it_is_not_the_target():
    m, m_tilde, proxies = _views()
    log_p, log_q = (proxy_log_probabilities(v, proxies, 0.1) for v in (m, m_tilde))
    g_m, g_tilde = _gradients(invariance_loss(m, m_tilde, proxies, stop_gradient=True), m, m_tilde)
    (g_m_prediction,) = _gradients(kl_divergence(log_q.detach(), log_p).mean(), m)  # m predicts, m~ is the target
    (g_tilde_prediction,) = _gradients(kl_divergence(log_p.detach(), log_q).mean(), m_tilde)
    torch.testing.assert_close(g_m, g_m_prediction)
    torch.testing.assert_close(g_tilde, g_tilde_prediction)

    g_m_open, g_tilde_open = _gradients(invariance_loss(m, m_tilde, proxies, stop_gradient=False), m, m_tilde)
    g_m_as_target, g_tilde_as_target = _gradients(kl_divergence(log_p, log_q).mean(), m, m_tilde)
    assert g_m_as_target.abs().sum() > 0 and g_tilde_as_target.abs().sum() > 0  # without it, both terms reach both
    (g_m_other,) = _gradients(kl_divergence(log_q, log_p).mean(), m)
    torch.testing.assert_close(g_m_open, g_m_as_target + g_m_other)
    assert not torch.allclose(g_m_open, g_m)


def test_proxies_of_every_loss_softtriple_centres_included():
    assert proxy_matrix(build_proxy_loss("proxy_anchor", 3, 8)).shape == (3, 8)
    assert proxy_matrix(build_proxy_loss("proxy_nca", 3, 8)).shape == (3, 8)
    soft_triple = SoftTripleLoss(num_classes=3, embedding_size=8, centers_per_class=2)
    assert proxy_matrix(soft_triple).shape == (6, 8)


# ---------------------------------------------------------------- ODBA


def test_variance_gate_equals_a_hand_computation():
    var_intra = torch.tensor([0.5, 2.0, 1e-5, 0.3, 4e-5])
    var_inter = torch.tensor([1.0, 0.5, 1e-5, 0.0, 7e-5])
    sigmoid = lambda t: 1 / (1 + math.exp(-t))
    by_hand = [sigmoid(0.5 - 1), sigmoid(4.0 - 1), 0.0, sigmoid(0.3 / 1e-8 - 1), sigmoid(4e-5 / (7e-5 + 1e-8) - 1)]
    torch.testing.assert_close(variance_gate(var_intra, var_inter, 1.0, 1e-4, 1e-8), torch.tensor(by_hand))


def test_class_variances_split_the_total_variance():
    m = torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0], [2.0, 2.0], [2.0, 8.0]])
    labels = torch.tensor([0, 0, 0, 1, 1])
    intra, inter = class_variances(m, labels)
    # class 0: means (3, 2), squared deviations (4+0+4, 4+0+4); class 1: means (2, 5), (0+0, 9+9)
    torch.testing.assert_close(intra, torch.tensor([8 / 5, 26 / 5]))
    grand = m.mean(0)
    torch.testing.assert_close(inter, (3 * (torch.tensor([3.0, 2.0]) - grand) ** 2 + 2 * (torch.tensor([2.0, 5.0]) - grand) ** 2) / 5)
    torch.testing.assert_close(intra + inter, m.var(0, unbiased=False))


def test_variance_tracker_starts_from_the_first_batch_then_moves_by_its_momentum():
    tracker = VarianceTracker(2, momentum=0.9)
    first = (torch.tensor([[0.0, 0.0], [2.0, 4.0]]), torch.tensor([0, 1]))
    second = (torch.tensor([[0.0, 0.0], [2.0, 0.0]]), torch.tensor([0, 0]))
    tracker.update(*first)
    torch.testing.assert_close(tracker.var_intra, torch.zeros(2))
    torch.testing.assert_close(tracker.var_inter, torch.tensor([1.0, 4.0]))
    tracker.update(*second)
    torch.testing.assert_close(tracker.var_intra, torch.tensor([0.1 * 1.0, 0.0]))
    torch.testing.assert_close(tracker.var_inter, torch.tensor([0.9 * 1.0, 0.9 * 4.0]))


def test_fifo_dictionary_keeps_the_newest_entries_in_order():
    fifo = FIFODictionary(size=5, dim=2)
    rows = torch.arange(26, dtype=torch.float32).reshape(13, 2)
    assert fifo.entries().shape == (0, 2)
    fifo.enqueue(rows[0:3])
    torch.testing.assert_close(fifo.entries(), rows[0:3])
    fifo.enqueue(rows[3:6])
    torch.testing.assert_close(fifo.entries(), rows[1:6])
    fifo.enqueue(rows[6:8])
    torch.testing.assert_close(fifo.entries(), rows[3:8])
    fifo.enqueue(rows[8:13])  # a batch the size of the dictionary replaces it
    torch.testing.assert_close(fifo.entries(), rows[8:13])
    fifo.enqueue(torch.cat([rows, rows]))  # a batch larger than the dictionary: its last 5 rows
    torch.testing.assert_close(fifo.entries(), rows[8:13])


def test_odba_enqueues_the_gated_embeddings():
    odba = ODBA(2, CouCESettings(momentum=0.5, dictionary_size=8))
    m, labels = torch.tensor([[1.0, 0.0], [3.0, 2.0], [2.0, 4.0], [2.0, 6.0]]), torch.tensor([0, 0, 1, 1])
    odba.update(m, labels)
    intra, inter = class_variances(m, labels)
    torch.testing.assert_close(odba.dictionary.entries(), variance_gate(intra, inter) * m)
    assert ODBA(2, CouCESettings(gate=False)).gate().tolist() == [1.0, 1.0]


def test_orthogonality_loss_equals_a_hand_computation():
    m = torch.tensor([[1.0, 0.0], [1.0, 1.0], [3.0, 4.0]])
    z = torch.tensor([[0.0, 2.0], [1.0, 0.0], [3.0, 4.0]])
    by_hand = (0.0**2 + (1 / math.sqrt(2)) ** 2 + 1.0**2) / 3
    assert orthogonality_loss(m, z, eps=0.0).item() == pytest.approx(by_hand)
    assert orthogonality_loss(project_out(m, z), z).item() == pytest.approx(0.0, abs=1e-10)


def test_the_retrieved_component_is_detached():
    generator = torch.Generator().manual_seed(0)
    m = torch.randn(4, 6, generator=generator, requires_grad=True)
    dictionary = torch.randn(10, 6, generator=generator, requires_grad=True)
    loss = orthogonality_loss(m, spurious_component(m, dictionary, detach=True))
    g_m, g_dictionary = _gradients(loss, m, dictionary)
    assert g_dictionary is None  # nothing reaches the dictionary
    constant_z = spurious_component(m.detach(), dictionary.detach())
    (g_constant,) = _gradients(orthogonality_loss(m, constant_z), m)
    torch.testing.assert_close(g_m, g_constant)  # nothing flows back through the attention

    g_m_open, g_dictionary_open = _gradients(orthogonality_loss(m, spurious_component(m, dictionary, detach=False)), m, dictionary)
    assert g_dictionary_open.abs().sum() > 0 and not torch.allclose(g_m_open, g_m)


# ---------------------------------------------------------------- L_cov and the total


def test_decorrelation_loss_equals_a_hand_computation():
    m = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 1.0], [4.0, 0.0, 1.0], [1.0, 5.0, 2.0]])
    centred = m - m.mean(0)
    by_hand = sum((centred[:, i] @ centred[:, j] / 3) ** 2 for i in range(3) for j in range(3) if i != j) / 3
    assert decorrelation_loss(torch.tensor(m)).item() == pytest.approx(by_hand)


def test_hard_projection_feeds_the_projected_embedding_to_the_proxy_loss():
    settings = CouCESettings(msrci=False, decorrelation=False, orthogonality="hard", dictionary_size=16)
    loss = build_proxy_loss("proxy_anchor", CLASSES, 6)
    couce = CouCE(loss, 6, settings)
    generator = torch.Generator().manual_seed(0)
    first, m = (torch.randn(8, 6, generator=generator) for _ in range(2))
    labels = torch.arange(8) % CLASSES
    couce(first, labels)  # fills the dictionary
    z = couce.odba.spurious(m)
    total, parts = couce(m, labels)
    torch.testing.assert_close(total, loss(project_out(m, z), labels))
    assert parts["orth"] > 0  # logged, not added


@pytest.mark.parametrize("loss_name", sorted(PROXY_LOSSES))
def test_with_every_module_off_the_objective_is_the_plain_proxy_objective(loss_name):
    model, batch = tiny_resnet(), tiny_batch()
    loss = build_proxy_loss(loss_name, CLASSES, EMBEDDING)
    baseline = ProxyObjective(copy.deepcopy(loss), 100.0)
    couce = build_couce_objective(CouCESettings.baseline(), loss_name, CLASSES, EMBEDDING, 100.0)
    couce.couce.loss.load_state_dict(loss.state_dict())
    expected, _ = baseline(model, batch)
    actual, parts = couce(model, batch)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert parts["orth"] == 0 and parts["inv"] == 0 and parts["cov"] == 0
    assert couce.param_groups()[0]["lr_multiplier"] == 100.0
    assert [p.shape for p in couce.param_groups()[0]["params"]] == [p.shape for p in baseline.param_groups()[0]["params"]]


@pytest.mark.parametrize("loss_name", sorted(PROXY_LOSSES))
def test_full_couce_trains_the_model_and_proxies_with_each_proxy_loss(loss_name):
    model = tiny_resnet()
    objective = build_couce_objective(CouCESettings(), loss_name, CLASSES, EMBEDDING, 100.0)
    objective(model, tiny_batch(seed=1), step=0)  # fills the dictionary
    loss, parts = objective(model, tiny_batch(seed=2), step=1)
    total = parts["dml"] + 0.05 * parts["orth"] + 0.1 * parts["inv"] + 0.04 * parts["cov"]
    torch.testing.assert_close(loss.detach(), total)
    assert all(parts[name] > 0 for name in ("orth", "inv", "cov"))
    loss.backward()
    assert model.backbone.conv1.weight.grad.abs().sum() > 0
    assert all(p.grad.abs().sum() > 0 for p in objective.param_groups()[0]["params"])
    assert no_hooks_left(model)


def test_full_couce_on_a_vit():
    model = tiny_vit()
    objective = CouCEObjective(build_proxy_loss("proxy_anchor", CLASSES, EMBEDDING), EMBEDDING)
    objective(model, tiny_batch(seed=1), step=0)
    loss, parts = objective(model, tiny_batch(seed=2), step=1)
    loss.backward()
    assert parts["inv"] > 0 and model.backbone.patch_embed.proj.weight.grad.abs().sum() > 0


def test_settings_parse_from_parameters_and_name_wrong_keys():
    settings = parse(CouCESettings, {"gammas": [0.1, 0.3], "band_schedule": "custom", "band_edges": [0.5, 1.0]}, "couce")
    assert settings.gammas == (0.1, 0.3) and settings.band_edges == (0.5, 1.0)
    assert settings.lambda_orth == 0.05 and settings.lambda_inv == 0.1 and settings.lambda_cov == 0.04
    with pytest.raises(ConfigError, match="couce.band_schedule"):
        parse(CouCESettings, {"band_schedule": "cubic"}, "couce")
    with pytest.raises(ConfigError, match="band_edges"):
        parse(CouCESettings, {"band_schedule": "custom"}, "couce")
    with pytest.raises(ConfigError, match="momentum"):
        parse(CouCESettings, {"momentum": 1.0}, "couce")


# ---------------------------------------------------------------- training with the loop


class _Images(torch.utils.data.Dataset):
    def __init__(self, n: int = 16):
        self.images = torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(3))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return {"image": self.images[index], "label": index % CLASSES}


def _train(folder, rank: int = 0, world_size: int = 1, compile: bool = False):
    from fdsml.data import ShuffledBatchSampler

    model = tiny_resnet()
    objective = build_couce_objective(CouCESettings(dictionary_size=12), "proxy_anchor", CLASSES, EMBEDDING, 10.0)
    sampler = ShuffledBatchSampler(16, 4, seed=0, num_replicas=world_size, rank=rank)
    loop = LoopConfig(max_steps=3, seed=0, device="cpu", checkpoint_every=100, resume=False, compile=compile)
    optimizer = OptimizerConfig(name="adamw", base_lr=1e-3, reference_batch=4, schedule="constant")
    keys = PlanKeys(batch="batch", warmup="warmup_steps")
    plan = plan_training("couce", images=16, batch_per_replica=4, world_size=world_size, optimizer=optimizer, loop=loop, keys=keys)
    result = train(model, objective, _Images(), sampler, loop, optimizer, f"{folder}/last.pt", plan=plan)
    return result, objective


def test_a_couce_trained_model_is_a_plain_model(tmp_path):
    result, objective = _train(tmp_path)
    model = result.model
    assert objective.couce.odba.dictionary.count == 12 and no_hooks_left(model)
    save_checkpoint(tmp_path / "model.pt", model_payload(model))
    loaded, _ = load_checkpoint(tmp_path / "model.pt")  # strict load_state_dict: no missing or unexpected keys
    plain = build_model(**model.config)
    assert set(plain.state_dict()) == set(model.state_dict())
    plain.load_state_dict(model.state_dict(), strict=True)
    x = tiny_batch(seed=5)["image"]
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model.eval()(x), rtol=0, atol=0)
        torch.testing.assert_close(plain.eval()(x), model(x), rtol=0, atol=0)


def _replica(rank: int, world_size: int, port: int, folder: str, compile: bool = False) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    torch.manual_seed(1000 + rank)
    torch.set_num_threads(1)
    if compile:  # dynamo traces torch.compile(DDP(model)) as in a run; the eager backend spares inductor's minutes
        eager = torch.compile
        torch.compile = lambda model, **options: eager(model, backend="eager", **options)
    result, objective = _train(folder, rank, world_size, compile)
    uneven = gather_across_ranks(torch.full((rank + 2, 3), float(rank)))
    state = {"model": result.model.state_dict(), "objective": objective.state_dict(), "uneven": uneven}
    torch.save(state, f"{folder}/rank{rank}.pt")
    torch.distributed.destroy_process_group()


@pytest.mark.slow  # two gloo replicas train CouCE
def test_two_replicas_keep_the_dictionary_statistics_and_weights_identical(tmp_path):
    mp.spawn(_replica, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    first, second = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2))
    assert first["objective"]["couce.odba.dictionary.count"] == 12  # full: 3 steps x 2 ranks x 4 images enqueued
    for name, tensor in first["model"].items():
        torch.testing.assert_close(second["model"][name], tensor, rtol=0, atol=0, msg=name)
    for name in ("memory", "position", "count"):
        key = f"couce.odba.dictionary.{name}"
        torch.testing.assert_close(second["objective"][key], first["objective"][key], rtol=0, atol=0, msg=key)
    for name in ("var_intra", "var_inter"):
        key = f"couce.odba.variances.{name}"
        torch.testing.assert_close(second["objective"][key], first["objective"][key], rtol=0, atol=0, msg=key)
    torch.testing.assert_close(first["uneven"], torch.tensor([[0.0] * 3] * 2 + [[1.0] * 3] * 3))


def _rows(rank: int, count: int, width: int | None) -> torch.Tensor:
    """``count`` rows whose values say their rank and position: 10 * rank + row."""
    values = 10.0 * rank + torch.arange(count, dtype=torch.float32)
    return values if width is None else values[:, None].expand(count, width).clone()


GATHERED_SIZES = ((2, 3), (4, 1))
"""Rows per rank in each gather: the second rank has more, then fewer."""


def _gather(rank: int) -> list[torch.Tensor]:
    """The gathers both ranks make: rows of floats (one with a gradient), then labels, each rank a different count."""
    float_rows = [_rows(rank, sizes[rank], 3).requires_grad_() for sizes in GATHERED_SIZES]
    labels = [_rows(rank, sizes[rank], None).long() for sizes in GATHERED_SIZES]
    return [gather_across_ranks(tensor) for tensor in (*float_rows, *labels)]


def _second_rank(port: int, folder: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2, timeout=timedelta(seconds=60))
    torch.save(_gather(1), f"{folder}/rank1.pt")
    torch.distributed.destroy_process_group()


def test_gather_across_ranks_concatenates_uneven_rows_in_rank_order_on_every_rank(tmp_path):
    """This process is rank 0 of a two-process gloo group (a spawned process the other), so the gathering path runs here."""
    port = free_port()
    other = mp.get_context("spawn").Process(target=_second_rank, args=(port, str(tmp_path)))
    other.start()
    try:
        torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2, timeout=timedelta(seconds=60))
        try:
            here = _gather(0)
        finally:
            torch.distributed.destroy_process_group()
    finally:
        other.join(timeout=120)
    assert other.exitcode == 0
    there = torch.load(tmp_path / "rank1.pt", weights_only=True)
    for index, (first, second) in enumerate(GATHERED_SIZES):
        expected = torch.cat([_rows(0, first, 3), _rows(1, second, 3)])
        torch.testing.assert_close(here[index], expected, rtol=0, atol=0)
        torch.testing.assert_close(here[2 + index], expected[:, 0].long(), rtol=0, atol=0)
        assert not here[index].requires_grad  # no gradient flows through the gathered rows
    for mine, theirs in zip(here, there):
        torch.testing.assert_close(theirs, mine, rtol=0, atol=0)


def test_stage_split_sees_the_model_through_compile_and_ddp_wrappers(tmp_path):
    """The loop hands the objective ``torch.compile(DDP(model))`` (train.compile under torchrun)."""
    model = tiny_resnet()
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        wrapped = torch.compile(torch.nn.parallel.DistributedDataParallel(model))
        split = StageSplit(wrapped)
    finally:
        torch.distributed.destroy_process_group()
    assert split.model is model and split.split_module is model.backbone.layer3


@pytest.mark.slow
def test_two_compiled_replicas_train_with_every_couce_module(tmp_path):
    """CouCE (MSRCI through the joint forward, ODBA, L_cov) with train.compile: true on two replicas."""
    mp.spawn(_replica, args=(2, free_port(), str(tmp_path), True), nprocs=2, join=True)
    first, second = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2))
    assert first["objective"]["couce.odba.dictionary.count"] == 12
    for name, tensor in first["model"].items():
        torch.testing.assert_close(second["model"][name], tensor, msg=name)


def test_the_statistics_and_the_dictionary_update_without_reading_values_on_the_host(monkeypatch):
    """On a GPU each host read is a sync per step: ODBA's updates keep everything on the device."""
    tracker, dictionary = VarianceTracker(EMBEDDING), FIFODictionary(6, EMBEDDING)
    m, labels = torch.randn(8, EMBEDDING, generator=torch.Generator().manual_seed(1)), torch.arange(8) % CLASSES
    first = class_variances(m, labels)
    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, lambda *args, **kwargs: pytest.fail("a host read on the hot path"))
    for rows in (m, m[:3] * 2):
        tracker.update(rows, labels[: rows.shape[0]])
        dictionary.enqueue(rows)
    monkeypatch.undo()
    torch.testing.assert_close(dictionary.entries(), torch.cat([m, m[:3] * 2])[-6:], rtol=0, atol=0)
    second = class_variances(m[:3] * 2, labels[:3])
    torch.testing.assert_close(tracker.var_intra, first[0] * 0.999 + second[0] * 0.001)


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"gammas": ()}, "gammas: give at least one band strength"),
        ({"gammas": (0.2, 0.0)}, "gammas: must be positive, got 0.0"),
        ({"min_scale": 0.0}, r"min_scale: must lie in \(0, 1\], got 0.0"),
        ({"min_scale": 1.5}, r"min_scale: must lie in \(0, 1\], got 1.5"),
        ({"temperature": 0.0}, "temperature: must be positive, got 0.0"),
        ({"momentum": 1.0}, r"momentum: must lie in \[0, 1\), got 1.0"),
        ({"momentum": -0.1}, r"momentum: must lie in \[0, 1\), got -0.1"),
        ({"gate_delta": -1e-9}, "gate_delta: must be >= 0, got -1e-09"),
        ({"dictionary_size": 0}, "dictionary_size: must be positive, got 0"),
        ({"lambda_orth": -0.01}, "lambda_orth: must be >= 0, got -0.01"),
        ({"lambda_inv": -0.01}, "lambda_inv: must be >= 0, got -0.01"),
        ({"lambda_cov": -0.01}, "lambda_cov: must be >= 0, got -0.01"),
        ({"eps": 0.0}, "eps: must be positive, got 0.0"),
    ],
)
def test_a_couce_setting_out_of_its_range_is_refused_naming_it(setting, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        CouCESettings(**setting)


def test_couce_settings_at_the_edges_of_their_ranges_are_accepted():
    edges = {"momentum": 0.0, "gate_delta": 0.0, "min_scale": 1.0, "lambda_orth": 0.0, "lambda_inv": 0.0, "lambda_cov": 0.0, "gammas": (0.5,)}
    settings = CouCESettings(**edges)
    assert {name: getattr(settings, name) for name in edges} == edges
