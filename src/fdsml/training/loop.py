"""The training loop, read top to bottom: data, forward, loss, backward, step, schedule, log, checkpoint.

One function for every objective (PA-Triplet, cross-entropy, proxy losses). It runs on the CPU
or a GPU (bf16 where the device computes it natively, in the parts the objective declares:
:mod:`fdsml.training.precision`; on CUDA channels-last, pinned memory, non-blocking copies), in one process or
one per GPU under ``torchrun`` (DDP). Every ``checkpoint_every`` steps and at the end rank 0
writes its full state atomically; ``resume`` continues from there, and because every random draw
is a function of (seed, epoch, step, rank), a resumed run ends with the weights of an
uninterrupted one (the protocol: :mod:`fdsml.training.resume`). The loop's configuration is
:mod:`fdsml.training.loop_config`, its optimiser and schedule :mod:`fdsml.training.optimizer`.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from fdsml.data.epoch_items import EpochBatches, epoch_loader
from fdsml.errors import DivergedError
from fdsml import distributed
from fdsml.timers import Stopwatch
from fdsml.run_events import StepReport, report_step
from fdsml.seeds import replica_rank, step_seed
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.model_setup import compute_head_in, cpu_bf16_guard, freeze_batchnorm, prepare_model, wrap_model
from fdsml.training.optimizer import build_optimizer, build_scheduler
from fdsml.training.prefetch import Prefetcher, Staged
from fdsml.training.resume import Resumable, resume_state
from fdsml.training.training_plan import TrainingPlan
from fdsml.training.precision import Precision, precision

logger = logging.getLogger(__name__)


def configure_cuda(deterministic: bool) -> None:
    """Fast CUDA defaults: cuDNN picks the fastest kernels (unless determinism is asked), TF32 matmuls.

    Determinism also fixes cuBLAS's workspace (``CUBLAS_WORKSPACE_CONFIG``), without which its
    matmuls are not reproducible and an exact resume is not exact; a value the user set stays.
    """
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = not deterministic
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def settle_rows(rows: list[dict[str, Any]], context: distributed.DistContext) -> list[dict[str, Any]]:
    """History rows with every tensor and timing read to a float, in one device sync.

    The loop keeps detached tensors and :class:`~fdsml.timers.Stopwatch` timings per step and
    reads them here, at log intervals and checkpoints, so steps never wait for the device. The
    losses are averaged over replicas in one all-reduce.
    """
    if not rows:
        return []
    losses = distributed.mean_across_ranks(torch.stack([row["loss"] for row in rows]), context)
    rows = [{**row, "loss": loss} for row, loss in zip(rows, losses)]
    slots = [(row, key) for row in rows for key, value in row.items() if torch.is_tensor(value)]
    values = torch.stack([row[key].detach().to(torch.float64) for row, key in slots]).tolist()
    for (row, key), value in zip(slots, values):
        row[key] = value
    for row in rows:
        for key, value in row.items():
            if isinstance(value, Stopwatch):
                row[key] = value.seconds
        row["images_per_s"] = row.pop("batch_images") / max(row["data_s"] + row["step_s"], 1e-9)
    return rows


class Validation(Protocol):
    """A held-out validation the loop runs between steps (:mod:`fdsml.evaluation.pretrain_validation`).

    Calling it must leave the model's weights, modes and the random state as it found them. Under
    DDP it runs on rank 0 alone (:func:`~fdsml.distributed.alone`): it joins no collective.
    """

    def due(self, step: int, total_steps: int) -> bool: ...

    def __call__(self, model: nn.Module, step: int) -> dict[str, float]: ...


@dataclass
class TrainResult:
    model: nn.Module
    history: pd.DataFrame
    steps: int


def _report_training(run_dir: Path, resumed_at: int, total_steps: int) -> None:
    """Say whether this call trained or found the run already finished in ``run_dir``."""
    if resumed_at >= total_steps:
        step = StepReport("training run", str(run_dir), reused=True, detail=f"finished at step {total_steps}")
        report_step(logger, step, "%s holds the finished run (%d steps): nothing to train", run_dir, total_steps)
    else:
        step = StepReport("training run", str(run_dir), reused=False, detail=f"steps {resumed_at + 1}-{total_steps}")
        report_step(logger, step, "Trained steps %d-%d of %d in %s", resumed_at + 1, total_steps, total_steps, run_dir)


def check_plan(plan: TrainingPlan, batch_sampler, context: distributed.DistContext) -> None:
    """``plan`` checked, and made for this world size and this sampler (a ValueError naming both otherwise)."""
    plan.check()
    if plan.world_size != context.world_size or len(batch_sampler) != plan.batches_per_replica:
        raise ValueError(
            f"{plan.step}: planned {plan.batches_per_replica} batches per epoch on {plan.world_size} replica(s), "
            f"the sampler gives {len(batch_sampler)} on {context.world_size}: build the sampler from the plan"
        )


def configure_torch(loop: LoopConfig, context: distributed.DistContext) -> None:
    """Determinism as asked, CUDA's fast defaults on a GPU, and the run's seed for what is drawn before the first step."""
    torch.use_deterministic_algorithms(loop.deterministic, warn_only=True)
    if context.device.type == "cuda":
        configure_cuda(loop.deterministic)
    torch.manual_seed(loop.seed)


@dataclass
class _Run:
    """One call of :func:`train`: what it trains, where it checkpoints, and its record so far.

    ``step`` counts the steps taken, ``history`` holds the settled rows, ``pending`` this
    interval's rows (tensors and timings, read at the next log or checkpoint, so steps never wait
    for the device), ``saved_at`` the step of the last checkpoint this call wrote or resumed.
    """

    parts: Resumable
    loop: LoopConfig
    optimizer_config: OptimizerConfig
    plan: TrainingPlan
    context: distributed.DistContext
    checkpoint_path: Path
    fingerprint: str
    validation: Validation | None
    live: Callable[[list[dict[str, Any]]], None] | None
    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    saved_at: int = 0
    resumed_at: int = 0
    progress: Any = None

    @property
    def computes_in(self) -> Precision:
        """The precision of each part of the step (:func:`~fdsml.training.precision.precision`)."""
        return precision(self.loop, self.context.device, self.parts.objective)

    def resume(self) -> None:
        """Continue from the checkpoint when it is this run's (:func:`~fdsml.training.resume.resume_state`)."""
        state = resume_state(self.checkpoint_path, self.loop, self.fingerprint, self.context, self.plan.step, self.parts.objective)
        if state is not None:
            self.step, self.history = self.parts.load(state)
            logger.info("Resuming from %s at step %d of %d", self.checkpoint_path, self.step, self.plan.total_steps)
        self.resumed_at = self.saved_at = self.step
        if self.live is not None:
            self.live(self.history)

    def announce(self) -> None:
        """Say, first and in one line (main rank), where and how it trains: device, each part's precision, world size."""
        plan, context = self.plan, self.context
        if context.is_main:
            logger.info(
                "Training on %s (%s), world size %d: %d steps (%d per epoch), global batch %d, lr %.3g",
                context.device, self.computes_in, context.world_size,
                plan.total_steps, plan.batches_per_replica, plan.global_batch, self.parts.optimizer.param_groups[1]["lr"],
            )

    def start(self) -> None:
        """Open the progress bar."""
        plan, context = self.plan, self.context
        self.progress = tqdm(total=plan.total_steps, initial=self.step, desc="train", unit="step", disable=not context.is_main)

    def validated(self, at: int) -> dict[str, float]:
        """The validation's metrics at step ``at``."""
        with distributed.alone():  # rank 0 validates while the other replicas wait in their next collective
            return self.validation(self.parts.model, at)

    def validate_initialisation(self) -> None:
        """The initialisation's row (step 0, no loss) when a validated run starts afresh: the history compares start and end."""
        if self.validation is not None and self.step == 0:
            self.history.append({"step": 0, "epoch": 0, "loss": float("nan"), "lr": float("nan"), **self.validated(0)})
            if self.live is not None:
                self.live(self.history[-1:])

    def train_step(self, wrapped: nn.Module, staged: Staged, epoch: int, data_s: float) -> float:
        """One step: seed, take the staged batch, forward and loss, backward, optimiser step, schedule.

        Its row waits in ``pending``, with the validation's metrics when one is due. Returns the
        learning rate the step took.
        """
        parts, context, loop = self.parts, self.context, self.loop
        watch = Stopwatch(context.device)
        torch.manual_seed(step_seed(loop.seed, self.step, replica_rank()))
        batch = staged.take()  # on CUDA the device waits here, inside step_s, for a batch still rendering
        # The trunk in bf16 where the run's precision says so (the head too, unless the model computes it in float32:
        # compute_head_in); every loss leaves autocast and computes in float32 (fdsml.losses.precision), and so do
        # the mining's descriptor distances, which read the batch's float32 psi.
        with torch.autocast(device_type=context.device.type, dtype=torch.bfloat16, enabled=self.computes_in.autocast):
            loss, metrics = parts.objective(wrapped, batch, self.step)
        parts.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        distributed.average_gradients(parts.objective, context)
        parts.optimizer.step()
        lr = parts.optimizer.param_groups[1]["lr"]
        parts.scheduler.step()
        self.step += 1
        self.pending.append(
            {
                "step": self.step,
                "epoch": epoch,
                "loss": loss.detach(),
                "lr": lr,
                **metrics,
                "data_s": data_s,
                "step_s": watch.stop(),
                "batch_images": self.plan.global_batch,
            }
        )
        if self.validation is not None and self.validation.due(self.step, self.plan.total_steps):
            self.pending[-1].update(self.validated(self.step))
        self.progress.update()
        return lr

    def settle(self) -> None:
        """Read the pending rows into the history (and ``live``); a loss that is not finite stops every replica."""
        rows = settle_rows(self.pending, self.context)  # the same mean losses on every replica: all stop together
        diverged = next((row for row in rows if not math.isfinite(row["loss"])), None)
        if diverged is not None:
            path, saved_at = self.checkpoint_path, self.saved_at
            kept = f"{path} keeps step {saved_at}" if saved_at else f"no checkpoint was written to {path}"
            raise DivergedError(
                f"{self.plan.step}: the loss is {diverged['loss']} at step {diverged['step']}; training stopped and {kept}. "
                "Lower the learning rate (base_lr), or turn train.amp off to rule out bf16 overflow"
            )
        self.history.extend(rows)
        self.pending.clear()
        if self.live is not None:
            self.live(rows)
        if self.history:
            self.progress.set_postfix(loss=f"{self.history[-1]['loss']:.4f}")

    def log(self, lr: float) -> None:
        """Settle, and log the last row (main rank)."""
        self.settle()
        row = self.history[-1]
        if self.context.is_main:
            logger.info("step %d/%d loss %.4f lr %.3g %.1f img/s", self.step, self.plan.total_steps, row["loss"], lr, row["images_per_s"])

    def checkpoint(self) -> None:
        """Settle, write the full state (main rank), and wait for it on every replica."""
        self.settle()
        if self.context.is_main:
            self.parts.save(
                self.checkpoint_path, self.step, self.history, self.loop, self.optimizer_config, self.fingerprint, self.context
            )
        self.saved_at = self.step
        distributed.barrier(self.context)

    def finish(self) -> TrainResult:
        """Close the progress bar, report the run, give every replica rank 0's BatchNorm statistics; the model in eval mode."""
        self.progress.close()
        if self.context.is_main:
            _report_training(self.checkpoint_path.parent, self.resumed_at, self.plan.total_steps)
        model = self.parts.model
        distributed.broadcast_buffers(model, self.context)
        model.eval()
        return TrainResult(model=model, history=pd.DataFrame(self.history), steps=self.step)


def train(
    model: nn.Module, objective: nn.Module, dataset, batch_sampler, loop: LoopConfig, optimizer_config: OptimizerConfig,
    checkpoint_path: str | Path, *, plan: TrainingPlan, fingerprint: str = "", validation: Validation | None = None,
    live: Callable[[list[dict[str, Any]]], None] | None = None,
) -> TrainResult:  # fmt: skip
    """Train ``model`` on ``objective`` for ``plan``'s steps; the last state is always at ``checkpoint_path``.

    ``plan`` (checked) gives every count: steps per epoch and in total, warm-up, global batch, learning rate.
    ``dataset`` and ``batch_sampler`` may offer ``set_epoch``; the sampler must already be sharded for this rank
    and yield the plan's batches. ``dataset`` may offer ``model_input``, applied to each batch's images on the
    device (e.g. uint8 renderings to float) while the batch before it trains (:mod:`fdsml.training.prefetch`).
    DataLoader workers persist across epochs: each index carries its epoch to them. A checkpoint is resumed only when its ``fingerprint`` (what defines the run) matches; a stale
    one from another configuration is started over, not continued. ``validation`` (given on the main rank only)
    adds its metrics to the history row of every step it is due at, and to a row of its own at step 0 (the
    initialisation; no loss) when the run starts afresh. ``live`` (main rank only,
    :class:`~fdsml.training.live.LiveRun`) is given the history resumed from the checkpoint, then every row as
    it settles.
    """
    context = distributed.setup(loop.device)
    check_plan(plan, batch_sampler, context)
    configure_torch(loop, context)
    model = prepare_model(model, loop, context)
    with cpu_bf16_guard(model, context.device):  # float32 where the CPU's bf16 kernels are wrong, while training
        objective.to(context.device)
        optimizer = build_optimizer(model, objective, optimizer_config, plan.learning_rate)
        parts = Resumable(model, objective, optimizer, build_scheduler(optimizer, optimizer_config, plan, loop.freeze_backbone_steps))
        run = _Run(parts, loop, optimizer_config, plan, context, Path(checkpoint_path), fingerprint, validation, live)
        run.announce()
        compute_head_in(model, run.computes_in)
        run.resume()  # before DDP wraps the model: every replica starts from the resumed weights
        wrapped = wrap_model(model, loop, context)
        run.start()
        batches = EpochBatches(batch_sampler)
        cuda = context.device.type == "cuda"
        loader = epoch_loader(dataset, batches, num_workers=loop.num_workers, pin_memory=cuda)
        prefetch = Prefetcher(context.device, channels_last=loop.channels_last and cuda, model_input=getattr(dataset, "model_input", None))
        run.validate_initialisation()
        model.train()
        if loop.freeze_batchnorm:
            freeze_batchnorm(model)
        while run.step < plan.total_steps:
            epoch, offset = divmod(run.step, plan.batches_per_replica)
            batches.start(epoch, offset)
            fetched = time.perf_counter()
            for staged in prefetch(islice(loader, min(len(batches), plan.total_steps - run.step))):
                lr = run.train_step(wrapped, staged, epoch, time.perf_counter() - fetched)
                if run.step % loop.log_every == 0 or run.step == plan.total_steps:
                    run.log(lr)
                if run.step % loop.checkpoint_every == 0 or run.step == plan.total_steps:
                    run.checkpoint()
                fetched = time.perf_counter()
        return run.finish()
