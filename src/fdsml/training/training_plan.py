"""The plan of a training step: every count the loop runs on, computed once and checked before any work.

A plan turns a step's configuration, its number of training images and the world size into
the numbers the loop uses: batches per replica per epoch, total and warm-up steps, the learning
rate of every parameter group (linearly scaled by the global batch), images per epoch, and the
memory of PA-Triplet's in-batch mining. :meth:`TrainingPlan.check` refuses a plan that cannot
train, naming the configuration key to change, so a published configuration fails in seconds,
not after days of GPU time. The loop takes its numbers from the plan and from nowhere else.
``params:plan`` holds the published split sizes a plan counts when a dataset's folder is absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fdsml.config import ConfigError, parse, require_fraction, require_positive
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.schedules import scaled_learning_rate


@dataclass(frozen=True)
class PlanKeys:
    """The dotted configuration keys a refused plan names (``batch``: the per-replica batch size)."""

    batch: str
    warmup: str

    @property
    def freeze(self) -> str:
        """The head-only warm-up's key, beside the optimiser's section (``retrieval.train.freeze_backbone_steps``)."""
        return self.warmup.split(".", 1)[0] + ".train.freeze_backbone_steps"


@dataclass(frozen=True)
class TrainingPlan:
    """The numbers of one training step at one world size (all counts per replica unless said global)."""

    step: str
    world_size: int
    images: int
    batch_per_replica: int
    global_batches_per_epoch: int
    batches_per_replica: int
    epochs: int
    total_steps: int
    schedule: str
    warmup_steps: int
    learning_rates: dict[str, float]
    triplets_per_batch: int | None
    triplet_mining_bytes: int | None
    keys: PlanKeys
    notes: tuple[str, ...] = field(default=())
    freeze_backbone_steps: int = 0

    @property
    def global_batch(self) -> int:
        return self.batch_per_replica * self.world_size

    @property
    def images_per_epoch(self) -> int:
        """Images seen per epoch by all replicas together (the tail that fills no batch is dropped)."""
        return self.batches_per_replica * self.global_batch

    @property
    def learning_rate(self) -> float:
        """The model's peak learning rate (trunk and head); other groups are multiples of it."""
        return self.learning_rates["trunk"]

    def problems(self) -> list[str]:
        """Why this plan cannot train, each naming the key to change (empty when it can)."""
        where = f"{self.step} at {self.world_size} replica(s)"
        found = []
        if self.global_batches_per_epoch == 0:
            found.append(
                f"{where}: a batch of {self.batch_per_replica} is larger than the {self.images} training images, "
                f"so training has 0 steps; change {self.keys.batch} {self._batch_fix()}"
            )
        elif self.batches_per_replica == 0:
            found.append(
                f"{where}: {self.global_batches_per_epoch} batches of {self.batch_per_replica} per epoch cannot feed "
                f"{self.world_size} replicas (0 steps); change {self.keys.batch} {self._batch_fix()}"
            )
        elif self.total_steps < 1:
            found.append(f"{where}: 0 training steps; raise the epochs or max_steps")
        if 0 < self.total_steps <= self.freeze_backbone_steps:
            found.append(
                f"{where}: the head-only warm-up ({self.freeze_backbone_steps} steps) is not shorter than training "
                f"({self.total_steps} steps), the trunk would never train; lower {self.keys.freeze} or raise the epochs"
            )
        if self.total_steps > 0 and self.warmup_steps >= self.total_steps:
            found.append(
                f"{where}: the warm-up ({self.warmup_steps} steps) is not shorter than training ({self.total_steps} steps), "
                f"the learning rate would never decay; lower {self.keys.warmup} or give the warm-up as a fraction "
                f"({self.keys.warmup.rsplit('.', 1)[0]}.warmup_fraction)"
            )
        return found

    def _batch_fix(self) -> str:
        return (
            f"so that every replica gets a batch per epoch ({self.images} images over {self.world_size} replica(s): "
            f"batches of at most {self.images // self.world_size})"
        )

    def check(self) -> TrainingPlan:
        """This plan, or a ConfigError listing every problem."""
        check_plans([self])
        return self

    def rows(self) -> list[tuple[str, str]]:
        """``(quantity, value)`` rows of the printed plan."""
        rows = [
            ("training images", f"{self.images:,}"),
            ("batch per replica", f"{self.batch_per_replica:,} (global {self.global_batch:,})"),
            ("batches per replica / epoch", f"{self.batches_per_replica:,} (of {self.global_batches_per_epoch:,} global batches)"),
            ("epochs", f"{self.epochs:,}"),
            ("total steps", f"{self.total_steps:,}"),
            ("warm-up steps", f"{self.warmup_steps:,} ({self.schedule})"),
            *((("head-only steps", f"{self.freeze_backbone_steps:,}"),) if self.freeze_backbone_steps else ()),
            *((f"learning rate, {group}", f"{rate:.4g}") for group, rate in self.learning_rates.items()),
            ("images per epoch", f"{self.images_per_epoch:,}"),
        ]
        if self.triplet_mining_bytes is not None:
            rows.append(
                ("triplet mining / batch", f"{self.triplet_mining_bytes / 2**20:,.1f} MiB ({self.triplets_per_batch:,} triplets)")
            )
        return rows + [("note", note) for note in self.notes]


def check_plans(plans: list[TrainingPlan]) -> None:
    """Raise one ConfigError listing the problems of every plan that cannot train."""
    found = [problem for plan in plans for problem in plan.problems()]
    if found:
        raise ConfigError("; ".join(found))


def plan_training(
    step: str,
    *,
    images: int,
    batch_per_replica: int,
    world_size: int,
    optimizer: OptimizerConfig,
    loop: LoopConfig,
    keys: PlanKeys,
    global_batches_per_epoch: int | None = None,
    lr_multipliers: dict[str, float] | None = None,
    triplets: tuple[int, int] | None = None,
    notes: tuple[str, ...] = (),
) -> TrainingPlan:
    """The plan of ``step`` (not yet checked: call :meth:`TrainingPlan.check`).

    ``global_batches_per_epoch`` defaults to one pass (``images // batch``, the tail dropped);
    replicas take every ``world_size``-th batch of that global sequence. Parameter groups are
    ``trunk`` and ``head`` at the scaled rate, then ``lr_multipliers`` (e.g. proxies at 100x).
    ``triplets`` is ``(mined, kept)`` per batch for PA-Triplet's batch mode.
    """
    require_positive("world_size", world_size)
    global_batches = images // batch_per_replica if global_batches_per_epoch is None else global_batches_per_epoch
    per_replica = global_batches // world_size
    total = loop.max_steps or loop.epochs * per_replica
    rate = scaled_learning_rate(optimizer.base_lr, batch_per_replica * world_size, optimizer.reference_batch)
    groups = {"trunk": 1.0, "head": 1.0, **(lr_multipliers or {})}
    return TrainingPlan(
        step=step,
        world_size=world_size,
        images=images,
        batch_per_replica=batch_per_replica,
        global_batches_per_epoch=global_batches,
        batches_per_replica=per_replica,
        epochs=loop.epochs if loop.max_steps is None else -(-total // max(per_replica, 1)),
        total_steps=total,
        schedule=optimizer.schedule,
        warmup_steps=optimizer.warmup_for(total),
        learning_rates={group: rate * multiplier for group, multiplier in groups.items()},
        triplets_per_batch=None if triplets is None else triplets[1],
        triplet_mining_bytes=None if triplets is None else triplet_mining_bytes(batch_per_replica, triplets[1]),
        keys=keys,
        notes=notes,
        freeze_backbone_steps=loop.freeze_backbone_steps,
    )


def triplet_mining_bytes(batch: int, kept: int) -> int:
    """Estimated peak bytes of mining one batch of ``batch`` images in PA-Triplet's batch mode.

    Per (anchor, candidate) pair 72 bytes: the two per-anchor candidate pools (int64 sort
    indices) and the float64 descriptor differences and distances. Per kept triplet 104 bytes:
    the drawn ranks (int64, with the spare draws of rejection sampling), the anchor and
    candidate indices unranked from them, and the ordered triplet with its distances and loss.
    The mined triplets are never materialised, so their number does not count.
    """
    return 72 * batch**2 + 104 * kept


def format_plans(plans: list[TrainingPlan], title: str = "") -> str:
    """The plans as readable tables, one per step, with the problems of any that cannot train."""
    blocks = [title] if title else []
    for plan in plans:
        rows = plan.rows()
        width = max(len(name) for name, _ in rows)
        lines = [f"{plan.step} ({plan.world_size} replica{'s' if plan.world_size > 1 else ''})", "-" * (width + 30)]
        lines += [f"  {name:<{width}}  {value}" for name, value in rows]
        lines += [f"  REFUSED: {problem}" for problem in plan.problems()]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


@dataclass(frozen=True)
class PublishedSizes:
    """``params:plan.dataset_sizes``: training images per dataset when its folder is not on this machine."""

    classification: dict[str, int] = field(default_factory=dict)
    retrieval: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        for kind in ("classification", "retrieval"):
            for name, size in getattr(self, kind).items():
                require_positive(f"{kind}.{name}", size)


@dataclass(frozen=True)
class GpuThroughput:
    """``params:plan.gpu_throughput``: training images per second of one GPU, per backbone, at ``reference_size`` px in
    bf16, and what a float32 (TF32) step runs at beside it (``float32_ratio``): an objective that keeps its trunk in
    float32 (PA-Triplet: docs/cpu.md) trains that much slower."""

    reference_size: int = 224
    images_per_second: dict[str, float] = field(default_factory=dict)
    float32_ratio: float = 1.0
    source: str = ""  # where the figures come from (a measurement's machine, or a published figure)

    def __post_init__(self):
        require_positive("reference_size", self.reference_size)
        require_fraction("float32_ratio", self.float32_ratio, inclusive_zero=False)
        for backbone, rate in self.images_per_second.items():
            require_positive(f"images_per_second.{backbone}", rate)

    def rate(self, backbone: str, image_size: int, *, bf16: bool = True) -> float:
        """Images per second for ``backbone`` at ``image_size`` px (the reference's, times the ratio of pixels), in bf16
        or float32."""
        if backbone not in self.images_per_second:
            known = ", ".join(sorted(self.images_per_second)) or "none"
            raise ConfigError(f"plan.gpu_throughput.images_per_second: no figure for {backbone} (known: {known}); add its training images/s on one GPU at {self.reference_size} px (benchmarks/gpu_check.py measures it)")
        scaled = self.images_per_second[backbone] * (self.reference_size / image_size) ** 2
        return scaled if bf16 else scaled * self.float32_ratio


@dataclass(frozen=True)
class PlanSettings:
    """``params:plan``."""

    dataset_sizes: PublishedSizes = field(default_factory=PublishedSizes)
    gpu_throughput: GpuThroughput = field(default_factory=GpuThroughput)


def parse_plan_params(params: dict[str, Any]) -> PlanSettings:
    """Validate ``params:plan``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(PlanSettings, params, "plan")
