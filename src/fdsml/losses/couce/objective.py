"""The CouCE total loss around a proxy loss, and the training-loop objective that feeds it both views."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from fdsml.losses.couce.decorrelation import decorrelation_loss
from fdsml.losses.couce.invariance import invariance_loss, proxy_matrix
from fdsml.losses.couce.msrci import MSRCI
from fdsml.losses.couce.odba import ODBA, orthogonality_loss, project_out
from fdsml.losses.couce.settings import CouCESettings
from fdsml.losses.couce.stage_split import StageSplit
from fdsml.losses.precision import full_precision
from fdsml.losses.proxy import build_proxy_loss
from fdsml.seeds import replica_rank, step_seed


class CouCE(nn.Module):
    """A proxy loss plus the CouCE regularisers: ``forward(m, labels, m_tilde=None) -> (loss, parts)``.

    ``m`` is the clean embedding, ``m_tilde`` the intervened view's (needed when ``msrci`` is on).
    L_orth is computed against the dictionary before this batch is enqueued (a sample never
    attends to itself); the statistics and dictionary are updated in training mode only. Parts
    always hold ``dml``, ``orth``, ``inv``, ``cov`` (0 for modules that are off) for comparable logs.
    Every term, ODBA's attention and its statistics included, is computed in float32 whatever the
    forward pass used (bf16 would make L_inv between two close views many times too large).
    """

    def __init__(self, loss: nn.Module, embedding_dim: int, settings: CouCESettings | None = None):
        super().__init__()
        self.loss = loss
        self.settings = settings or CouCESettings()
        self.odba = ODBA(embedding_dim, self.settings) if self.settings.odba else None

    @full_precision
    def forward(self, m: torch.Tensor, labels: torch.Tensor, m_tilde: torch.Tensor | None = None):
        s = self.settings
        zero = m.new_zeros(())
        orth, inv, cov, m_dml = zero, zero, zero, m
        parts: dict[str, Any] = {}
        if self.odba is not None:
            z = self.odba.spurious(m)
            if z is not None:
                orth = orthogonality_loss(m, z, s.eps)
                if s.orthogonality == "hard":
                    m_dml = project_out(m, z, s.eps)
            parts["odba_gate"] = self.odba.gate().mean()
        dml = self.loss(m_dml, labels)
        total = dml
        if self.odba is not None and s.orthogonality == "soft":
            total = total + s.lambda_orth * orth
        if s.msrci:
            if m_tilde is None:
                raise ValueError("CouCE with msrci on needs the intervened view's embedding m_tilde")
            inv = invariance_loss(m, m_tilde, proxy_matrix(self.loss), s.temperature, s.stop_gradient)
            total = total + s.lambda_inv * inv
        if s.decorrelation:
            cov = decorrelation_loss(m)
            total = total + s.lambda_cov * cov
        if self.odba is not None and self.training:
            self.odba.update(m, labels)
        parts.update(dml=dml.detach(), orth=orth.detach(), inv=inv.detach(), cov=cov.detach())
        return total, parts


class CouCEObjective(nn.Module):
    """Retrieval fine-tuning with a proxy loss under CouCE: ``forward(model, batch, step) -> (loss, parts)``.

    With MSRCI on, one forward of ``model`` runs Stage 1 once and Stage 2 on the clean and the
    intervened map (:meth:`StageSplit.joint_forward`); otherwise it is the plain forward. The
    intervention's draws come from a generator seeded by (seed, step, rank) (:func:`fdsml.seeds.replica_rank`:
    no rank in a single process, as every other draw of the loop). With every module
    off the loss is exactly that of the plain proxy loss on the model's embedding.
    """

    bf16_parts: tuple[str, ...] = ("trunk",)  # as the plain proxy objective's (fdsml.training.objectives.ProxyObjective)

    def __init__(
        self,
        loss: nn.Module,
        embedding_dim: int,
        settings: CouCESettings | None = None,
        proxy_lr_multiplier: float = 100.0,
        seed: int = 0,
    ):
        super().__init__()
        self.settings = settings or CouCESettings()
        self.couce = CouCE(loss, embedding_dim, self.settings)
        s = self.settings
        self.msrci = MSRCI(s.gammas, s.band_schedule, s.band_edges, s.min_scale) if s.msrci else None
        self.proxy_lr_multiplier = proxy_lr_multiplier
        self.seed = seed

    def _generator(self, device: torch.device, step: int) -> torch.Generator:
        return torch.Generator(device=device).manual_seed(step_seed(self.seed, step, replica_rank(), "nuisance"))

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        images, labels = batch["image"], batch["label"]
        if self.msrci is None:
            return self.couce(model(images), labels)
        generator = self._generator(images.device, step)
        split = StageSplit(model, self.settings.split_at)
        both = split.joint_forward(model, images, lambda h: self.msrci(h, generator))
        m, m_tilde = both[: images.shape[0]], both[images.shape[0] :]
        return self.couce(m, labels, m_tilde)

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.couce.loss.parameters()), "lr_multiplier": self.proxy_lr_multiplier, "weight_decay": 0.0}]


def build_couce_objective(
    settings: CouCESettings,
    loss_name: str,
    num_classes: int,
    embedding_dim: int,
    proxy_lr_multiplier: float = 100.0,
    *,
    seed: int = 0,
    loss_options: Mapping[str, Any] | None = None,
) -> CouCEObjective:
    """A :class:`CouCEObjective` around the named pytorch-metric-learning proxy loss."""
    loss = build_proxy_loss(loss_name, num_classes, embedding_dim, **dict(loss_options or {}))
    return CouCEObjective(loss, embedding_dim, settings, proxy_lr_multiplier, seed)
