"""The training loop's configuration: how long, where and how often (``LoopConfig``), and the optimiser
and its schedule (``OptimizerConfig``), as every training step's ``train`` and ``optimizer`` keys give them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fdsml.config import ConfigError, require_fraction, require_positive
from fdsml.fingerprints import non_defining
from fdsml.training.precision import check_bf16_parts


@dataclass(frozen=True)
class OptimizerConfig:
    """Optimiser and schedule; the learning rate is ``base_lr * global batch / reference_batch``.

    The warm-up (``warmup_cosine`` only) is ``warmup_steps`` steps, or ``warmup_fraction`` of the
    training steps when that is given (then ``warmup_steps`` must stay 0): a fraction keeps its
    meaning whatever the dataset size and world size, a step count does not.
    """

    name: Literal["sgd", "adamw"] = "sgd"
    base_lr: float = 0.1
    reference_batch: int = 256
    momentum: float = 0.9
    weight_decay: float = 1e-4
    schedule: Literal["constant", "constant_cosine", "warmup_cosine"] = "constant_cosine"
    constant_fraction: float = 0.4
    warmup_steps: int = 0
    warmup_fraction: float | None = None

    def __post_init__(self):
        require_positive("base_lr", self.base_lr)
        require_positive("reference_batch", self.reference_batch)
        require_fraction("constant_fraction", self.constant_fraction)
        if self.weight_decay < 0 or self.warmup_steps < 0 or self.momentum < 0:
            raise ConfigError("weight_decay, momentum, warmup_steps: must be >= 0")
        if self.warmup_fraction is not None:
            if not 0 <= self.warmup_fraction < 1:
                raise ConfigError(f"warmup_fraction: must lie in [0, 1), got {self.warmup_fraction!r}")
            if self.warmup_steps:
                raise ConfigError(
                    f"warmup_steps: give warmup_steps ({self.warmup_steps}) or warmup_fraction ({self.warmup_fraction}), "
                    "not both; set warmup_steps to 0 to use the fraction"
                )
        if self.schedule != "warmup_cosine" and (self.warmup_steps or self.warmup_fraction):
            raise ConfigError(f"warmup_steps, warmup_fraction: schedule {self.schedule!r} has no warm-up; use warmup_cosine")

    def warmup_for(self, total_steps: int) -> int:
        """Warm-up steps of a run of ``total_steps`` steps (the fraction rounded to the nearest step)."""
        if self.warmup_fraction is not None:
            return int(round(self.warmup_fraction * total_steps))
        return self.warmup_steps


@dataclass(frozen=True)
class LoopConfig:
    """How long, where, and how often to log and checkpoint.

    ``num_workers`` cannot change the result (every image is drawn from (seed, epoch, index)),
    nor can the log and checkpoint intervals or ``resume``: they are not part of a run's fingerprint.
    ``amp`` computes in bf16 where the device does so natively, in the parts the objective declares
    (``bf16_parts``: the trunk, the head) or ``bf16_parts`` names (:mod:`fdsml.training.precision`); false
    forces float32. The loss is float32 either way.
    ``compile`` runs the model through ``torch.compile`` (worth it on GPUs for long runs; off by
    default, as compiling costs minutes and fused kernels round differently; on the CPU conf/cpu's
    step ran slower compiled than eager: benchmarks/pretrain_step.py --compile).
    ``sync_batchnorm`` normalises over the global batch under DDP (CUDA only: torch's
    SyncBatchNorm has no CPU kernel); otherwise each replica uses its own batch's statistics.
    """

    epochs: int = 1
    max_steps: int | None = None
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    amp: bool = True
    bf16_parts: tuple[Literal["trunk", "head"], ...] | None = None
    channels_last: bool = True
    num_workers: int = non_defining(default=0)
    log_every: int = non_defining(default=10)
    checkpoint_every: int = non_defining(default=100)
    resume: bool = non_defining(default=True)
    deterministic: bool = False
    compile: bool = False
    freeze_backbone_steps: int = 0
    freeze_batchnorm: bool = False
    sync_batchnorm: bool = False

    def __post_init__(self):
        require_positive("epochs", self.epochs)
        if self.bf16_parts is not None:
            object.__setattr__(self, "bf16_parts", check_bf16_parts(self.bf16_parts))
        if self.freeze_backbone_steps < 0:
            raise ConfigError(f"freeze_backbone_steps: must be >= 0, got {self.freeze_backbone_steps}")
        if self.max_steps is not None:
            require_positive("max_steps", self.max_steps)
        require_positive("log_every", self.log_every)
        require_positive("checkpoint_every", self.checkpoint_every)
        if self.num_workers < 0:
            raise ConfigError(f"num_workers: must be >= 0, got {self.num_workers}")
