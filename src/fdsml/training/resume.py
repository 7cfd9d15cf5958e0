"""The resume protocol: what a checkpoint holds, whether a run may continue from it, and restoring it.

Rank 0 alone decides whether to resume, from its own run folder, and sends the state to every
replica before DDP wraps the model, so node-local run folders resume alike. A checkpoint is
continued only when its fingerprint (what defines the run) matches this run's; one written at another
world size, or in another precision (``precision``: what the trunk and the head computed in), is refused with the fix.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from fdsml import distributed
from fdsml.config import ConfigError
from fdsml.models.checkpoint import load_checkpoint_file, save_checkpoint
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.precision import Precision, precision

logger = logging.getLogger(__name__)


@dataclass
class Resumable:
    """What a checkpoint saves and a resume restores: the model, the objective (its proxies), the optimiser, its schedule."""

    model: nn.Module
    objective: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler

    def load(self, state: dict) -> tuple[int, list[dict[str, Any]]]:
        """Restore every part from a checkpoint's ``state``; returns its step and history."""
        self.model.load_state_dict(state["state_dict"])
        self.objective.load_state_dict(state["objective"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        return state["step"], list(state["history"])

    def save(
        self,
        path: Path,
        step: int,
        history: list[dict[str, Any]],
        loop: LoopConfig,
        optimizer_config: OptimizerConfig,
        fingerprint: str,
        context: distributed.DistContext,
    ) -> None:
        """Write the full state at ``step`` atomically to ``path``, with what :func:`resume_state` checks."""
        save_checkpoint(
            path,
            {
                "model": self.model.config,
                "state_dict": self.model.state_dict(),
                "objective": self.objective.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "step": step,
                "history": history,
                "loop": asdict(loop),
                "optimizer_config": asdict(optimizer_config),
                "fingerprint": fingerprint,
                "world_size": context.world_size,
                "precision": str(precision(loop, context.device, self.objective)),
            },
        )


def resume_state(
    checkpoint_path: Path, loop: LoopConfig, fingerprint: str, context: distributed.DistContext, step_name: str,
    objective: nn.Module | None = None,
) -> dict | None:  # fmt: skip
    """The state every replica resumes from, as rank 0 finds it in its own run folder (None: start over).

    One written at another world size is refused, since its learning rate was scaled for another global
    batch and the batches per epoch and data order differ. A checkpoint of another configuration is started
    over: a run's fingerprint holds the precision it resolves to, so a change of precision (``train.amp``,
    ``train.bf16_parts``, an objective's declaration) starts a fingerprinted run over too. One of the same
    fingerprint trained in another precision (a caller that gives no fingerprint) is refused, since continuing
    would mix bf16 and float32 steps in one run (a checkpoint from before precisions were recorded is judged by
    its fingerprint alone). Rank 0 sends its decision and the state (on the CPU) to every replica.
    """
    outcome: dict[str, Any] = {"state": None, "refusal": None}
    if context.is_main and loop.resume and checkpoint_path.exists():
        state = load_checkpoint_file(checkpoint_path, map_location="cpu")
        written_by = state.get("world_size", context.world_size)
        trained_in, computes_in = state.get("precision"), str(precision(loop, context.device, objective))
        if written_by != context.world_size:
            outcome["refusal"] = (
                f"{checkpoint_path}: written by {written_by} process(es), this run has {context.world_size}; "
                f"resuming would keep the learning rate scaled for the old global batch while the steps per epoch "
                f"and data order change. Relaunch with {written_by} process(es) to continue, or start over at "
                f"{context.world_size}: remove {checkpoint_path.parent} or set {step_name.split('/')[0]}.train.resume: false"
            )
        elif state.get("fingerprint") != fingerprint:
            logger.warning("%s belongs to another configuration: starting over instead of resuming", checkpoint_path)
        elif trained_in is not None and trained_in != computes_in:
            outcome["refusal"] = precision_refusal(checkpoint_path, trained_in, computes_in, loop, step_name)
        else:
            outcome["state"] = state
    outcome = distributed.from_main_rank(outcome, context)
    if outcome["refusal"]:
        raise ConfigError(outcome["refusal"])
    return outcome["state"]


def precision_refusal(checkpoint_path: Path, trained_in: str, computes_in: str, loop: LoopConfig, step_name: str) -> str:
    """Why a checkpoint trained in ``trained_in`` does not continue in ``computes_in``, naming the key and the fix."""
    step = step_name.split("/")[0]
    parts = "null" if loop.bf16_parts is None else f"[{', '.join(loop.bf16_parts)}]"
    fix = (
        f"{step}.train.amp: false"
        if trained_in == str(Precision())
        else f"{step}.train.amp: true, with {step}.train.bf16_parts naming its bf16 parts, on a device that computes bf16 "
        "natively (CUDA, or a CPU with AVX512-BF16 or AMX)"
    )
    return (
        f"{checkpoint_path}: trained in {trained_in}, this run computes in {computes_in} ({step}.train.amp: "
        f"{str(loop.amp).lower()}, bf16_parts: {parts}); resuming would mix precisions in one run. Set {fix} to "
        f"continue it, or start over: remove {checkpoint_path.parent} or set {step}.train.resume: false"
    )
