"""Every loss is computed in float32 whatever autocast the forward pass ran under.

Under bf16 autocast a matmul inside a loss runs in bf16 even on float32 inputs, and a loss made of
small differences (the invariance KL between two close views) comes out many times too large.
Each case computes a loss under ``torch.autocast("cpu", dtype=torch.bfloat16)`` and without it.
"""

import copy

import pytest
import torch
from torch import nn

from fdsml.losses.couce import CouCE, CouCESettings, build_couce_objective
from fdsml.losses.pair import PAIR_LOSSES, build_pair_loss
from fdsml.losses.pa_triplet import PATripletLoss, mine_batch_triplets
from fdsml.losses.proxy import PROXY_LOSSES, build_proxy_loss
from fdsml.training.classification import MixupObjective, MixupSettings
from fdsml.training.objectives import CrossEntropyObjective, ProxyObjective
from fdsml.training.pretrain import build_objective, parse_pretrain_params
from fdsml.training.pretrain_objectives import known_objectives
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective

EMBEDDING, CLASSES, BATCH = 32, 4, 16
RELATIVE = 1e-3


def embeddings(seed: int = 0, n: int = BATCH) -> torch.Tensor:
    return torch.randn(n, EMBEDDING, generator=torch.Generator().manual_seed(seed))


LABELS = torch.arange(BATCH) % CLASSES
PSI = torch.randn(BATCH, 6, generator=torch.Generator().manual_seed(1))


def bf16_and_float32(compute):
    """``compute()`` under bf16 autocast on the CPU, then without autocast."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = compute()
    return autocast, compute()


def assert_float32_value(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == torch.float32
    assert abs(actual.item() - expected.item()) <= RELATIVE * abs(expected.item()), (actual.item(), expected.item())


def test_pa_triplet_loss_is_float32_under_autocast():
    indices = mine_batch_triplets(LABELS, PSI, "all")
    loss = PATripletLoss()
    (actual, _), (expected, _) = bf16_and_float32(lambda: loss(embeddings(), indices))
    assert_float32_value(actual, expected)


@pytest.mark.parametrize("name", sorted(PROXY_LOSSES))
def test_each_proxy_loss_is_float32_under_autocast(name):
    torch.manual_seed(0)
    loss = build_proxy_loss(name, CLASSES, EMBEDDING)
    actual, expected = bf16_and_float32(lambda: loss(embeddings(), LABELS))
    assert_float32_value(actual, expected)


@pytest.mark.parametrize("name", sorted(PAIR_LOSSES))
def test_each_pair_loss_is_float32_under_autocast(name):
    loss = build_pair_loss(name)
    actual, expected = bf16_and_float32(lambda: loss(embeddings(), LABELS))
    assert_float32_value(actual, expected)


def two_views(apart: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``m`` and ``m~`` with ||m~_i - m_i|| = ``apart`` x ||m_i||."""
    m, direction = embeddings(2), nn.functional.normalize(embeddings(3), dim=1)
    return m, m + apart * m.norm(dim=1, keepdim=True) * direction


@pytest.mark.parametrize("apart", [0.01, 0.05])
def test_every_couce_term_is_float32_under_autocast(apart):
    torch.manual_seed(0)
    couce = CouCE(build_proxy_loss("proxy_anchor", CLASSES, EMBEDDING), EMBEDDING, CouCESettings(dictionary_size=64))
    couce(embeddings(4), LABELS, embeddings(5))  # fills the dictionary: L_orth attends to it
    couce.eval()  # the statistics and the dictionary stay as they are between the two computations
    m, m_tilde = two_views(apart)
    (actual, actual_parts), (expected, expected_parts) = bf16_and_float32(lambda: couce(m, LABELS, m_tilde))
    assert_float32_value(actual, expected)
    for name in ("dml", "orth", "inv", "cov"):
        assert expected_parts[name] > 0
        assert_float32_value(actual_parts[name], expected_parts[name])


class Probe(nn.Module):
    """A model whose output is fixed: bf16 under autocast (as a real forward's), float32 otherwise.

    The values are bf16-exact, so the two runs differ only in the loss arithmetic, which must be
    float32 in both. It records whether its forward ran under autocast (it must: only the loss
    leaves autocast).
    """

    def __init__(self, output: torch.Tensor):
        super().__init__()
        self.output = output.to(torch.bfloat16).float()
        self.autocast_seen = False

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.autocast_seen = torch.is_autocast_enabled("cpu")
        return self.output.to(torch.bfloat16) if self.autocast_seen else self.output


def pretraining(name: str):
    """The registered pre-training objective ``name`` on its settings' defaults."""
    return lambda: build_objective(parse_pretrain_params({"objective": name}), num_classes=CLASSES, embedding_dim=EMBEDDING)


OBJECTIVES = {
    **{f"pretrain.{name}": pretraining(name) for name in known_objectives()},  # every registered one, a new one too
    "pa_triplet_all": lambda: PATripletObjective("all"),
    "graded_pa_triplet": lambda: PATripletObjective("all", graded_margin=True),
    "cross_entropy": lambda: CrossEntropyObjective(label_smoothing=0.1),
    "mixup": lambda: MixupObjective(EMBEDDING, MixupSettings(mixup_alpha=0.5, cutmix_alpha=1.0), label_smoothing=0.1),
    "proxy": lambda: ProxyObjective(build_proxy_loss("soft_triple", CLASSES, EMBEDDING)),
    "couce": lambda: build_couce_objective(CouCESettings(msrci=False), "proxy_anchor", CLASSES, EMBEDDING),
}


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_objectives_run_the_forward_under_autocast_and_the_loss_in_float32(name):
    torch.manual_seed(0)
    objective = OBJECTIVES[name]()
    model = Probe(embeddings(6))
    batch = {"image": torch.zeros(BATCH, 3, 8, 8), "label": LABELS, "psi": PSI}
    twin = copy.deepcopy(objective)  # objectives with state (CouCE's statistics) start equal
    with torch.autocast("cpu", dtype=torch.bfloat16):
        actual, _ = objective(model, batch)
    assert model.autocast_seen
    expected, _ = twin(model, batch)
    assert not model.autocast_seen
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual, expected)  # the same float32 arithmetic, up to summation order


def test_mixup_computes_its_soft_target_loss_with_autocast_off(monkeypatch):
    seen = []

    def log_softmax(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu"))
        return torch.log_softmax(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "log_softmax", log_softmax)
    batch = {"image": torch.zeros(BATCH, 3, 8, 8), "label": LABELS, "psi": PSI}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        OBJECTIVES["mixup"]()(Probe(embeddings(6)), batch)
    assert seen == [False]
