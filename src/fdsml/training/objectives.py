"""Training objectives: what one batch costs. The loop calls ``objective(model, batch)`` and nothing else.

An objective returns the loss and a dict of named parts (0-d tensors, numbers or
:class:`~fdsml.timers.Stopwatch` timings) that the loop logs, reading them at log intervals.
Extra trainable parameters (proxies) are the objective's own, with their own optimiser
settings in ``param_groups``. The model's forward runs under the loop's autocast; every loss
runs in float32 (:mod:`fdsml.losses.precision`). Which of the model's parts (trunk, head) compute in
bf16 where the device has it is the objective's ``bf16_parts`` (:mod:`fdsml.training.precision`; none
declared: both), the same on every device.

Here live cross-entropy (FDSL's and classification's) and the proxy objective (retrieval's). The
others live beside their settings: pre-training's in :mod:`fdsml.training.pretrain_objectives`,
one module per objective; classification's mixup in :mod:`fdsml.training.classification`; CouCE's
in :mod:`fdsml.losses.couce.objective`, with the method's own state.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fdsml.losses.precision import full_precision

cross_entropy = full_precision(F.cross_entropy)


@full_precision
def soft_target_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against soft targets (one distribution per row), averaged over the batch."""
    return torch.sum(-targets * F.log_softmax(logits, dim=1), dim=1).mean()


class CrossEntropyObjective(nn.Module):
    """The FDSL baseline: cross-entropy over the fractal class labels on the same backbone."""

    def __init__(self, label_smoothing: float = 0.0):
        super().__init__()
        self.label_smoothing = label_smoothing

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        logits = model(batch["image"])
        loss = cross_entropy(logits, batch["label"], label_smoothing=self.label_smoothing)
        accuracy = (logits.detach().argmax(dim=1) == batch["label"]).float().mean()
        return loss, {"accuracy": accuracy}

    def param_groups(self) -> list[dict]:
        return []


class ProxyObjective(nn.Module):
    """Retrieval fine-tuning with a proxy loss of :mod:`fdsml.losses.proxy`.

    The proxies train at ``proxy_lr_multiplier`` x the lr.
    """

    # The trunk in bf16, the head in float32, on every device: fine-tuned so, the proxy loss retrieves as in float32
    # (docs/cpu.md, precision parity), and its embeddings, on which the proxies' margins act, keep float32's resolution.
    bf16_parts: tuple[str, ...] = ("trunk",)

    def __init__(self, loss: nn.Module, proxy_lr_multiplier: float = 100.0):
        super().__init__()
        self.loss = loss
        self.proxy_lr_multiplier = proxy_lr_multiplier

    def forward(self, model: nn.Module, batch: dict[str, Any], step: int = 0):
        return self.loss(model(batch["image"]), batch["label"]), {}

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.loss.parameters()), "lr_multiplier": self.proxy_lr_multiplier, "weight_decay": 0.0}]
