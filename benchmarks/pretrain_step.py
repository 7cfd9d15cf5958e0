"""The project's pre-training step against a bare timm forward/backward/SGD loop on the same batch and precision.

    python benchmarks/pretrain_step.py                       # conf/base's step, float32 and bf16, 8 rounds
    python benchmarks/pretrain_step.py --env cpu --rounds 12 --precisions bf16
    python benchmarks/pretrain_step.py --env cpu --compile   # torch.compile: compile seconds against the step it saves
    python benchmarks/pretrain_step.py --env cpu --run 200 --rounds 2   # whole runs: steps, validations, the rest

For each objective (PA-Triplet as configured, PA-Triplet ``all`` mining every triplet of a shuffled batch, the FDSL
cross-entropy) the project's step is the training loop's own (:meth:`fdsml.training.loop._Run.train_step`: seeding,
autocast, objective with its mining and descriptor distances, float32 loss, backward, SGD, schedule) on a batch its
loader rendered; the bare step is ``timm.create_model`` with the same output size, a plain float32 loss on its
output, backward and ``torch.optim.SGD``, on the same images under the same autocast (the precision the project's
step computes in: ``train.amp`` true or false, and bf16 only where the objective takes it). The two alternate step by
step (project, bare, project, bare, ... for every objective and precision in turn), after a warm-up of each, so load
on a shared machine hits both alike; each cell is the median of ``--rounds`` steps. The data path (rendering,
collation and the descriptor lookup: the loader and prefetcher) and the mining (triplet construction from the
descriptors, timed inside the objective) are given as shares of the project's step.

With ``--compile`` the environment's own step runs eager and through ``torch.compile`` (``train.compile: true``,
inductor's C++ kernels) in the precision of ``--precisions``' first entry: the compiled model's first steps pay the
compilation, from a cold inductor cache (a fresh folder, as a first run on a machine pays it); then eager and
compiled steps alternate. Printed: the compile seconds, both steps, their ratio, where compiling breaks even, and the
net seconds over the environment's planned steps (``pretrain.train.max_steps``).

With ``--run STEPS`` each round runs :func:`fdsml.training.pretrain.pretrain` itself for STEPS steps (validation at
the start and the end, as the environment configures it: conf/cpu's probe reads all 2,120 test images) from a fresh
run folder, once in float32 and once with ``train.amp: true`` (bf16 in the parts the environment's objective
declares), alternating. The codes table is generated once before the rounds. A run's seconds split into its steps
(the history's ``data_s``, loading and rendering, and ``step_s``), its validations (``validation_s``) and the rest
(start-up, logging, checkpoints); the full run's seconds are projected from the medians: the environment's
``max_steps`` steps and its validations (every ``validation.every`` steps and at the end).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from itertools import count, islice

import timm
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from fdsml import distributed
from fdsml.data.epoch_items import EpochBatches, epoch_loader
from fdsml.data.holdout import TrainingRows, split_table
from fdsml.families.generation import generate_table
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.training.loop import _Run, configure_torch
from fdsml.training.model_setup import prepare_model, wrap_model
from fdsml.training.optimizer import build_optimizer, build_scheduler
from fdsml.training.precision import precision
from fdsml.training.prefetch import Prefetcher
from fdsml.training.pretrain import (
    build_batch_sampler, build_fractal_dataset, build_objective, build_pretrain_model, parse_pretrain_params, plan_pretrain, pretrain,
)  # fmt: skip
from fdsml.training.resume import Resumable
from timing import interleaved, parameters, parser, print_result, use_threads

OBJECTIVES = {  # the name printed -> pretrain overrides on top of the environment's
    "pa_triplet (as configured)": {"objective": "pa_triplet"},
    "pa_triplet all (every triplet of the batch)": {"objective": "pa_triplet", "pa_triplet": {"filter": "all", "mode": "batch"}},
    "fdsl": {"objective": "fdsl"},
}
PRECISIONS = {"float32": False, "bf16": True}  # -> train.amp
FIRST_STEPS = 3  # compiled steps counted as compilation: the first traces forward and backward; BatchNorm's train-mode guards may add one


def merged(base: dict, extra: dict) -> dict:
    """``base`` with ``extra``'s keys, nested dictionaries merged."""
    return {**base, **{k: merged(base.get(k, {}), v) if isinstance(v, dict) else v for k, v in extra.items()}}


@dataclass
class ProjectStep:
    """The training loop's step for one configuration, with a few batches its loader staged (and what they cost)."""

    run: _Run
    wrapped: torch.nn.Module
    batches: list
    data_s: list[float]

    def __call__(self, index: int) -> tuple[float, float]:
        """One step on batch ``index``; its seconds and the mining's seconds."""
        started = time.perf_counter()
        self.run.train_step(self.wrapped, self.batches[index % len(self.batches)], 0, 0.0)
        seconds = time.perf_counter() - started
        row = self.run.pending.pop()
        mining = row.get("mining_s")
        return seconds, mining.seconds if mining is not None else 0.0


def project_step(params: dict, overrides: dict, amp: bool, batches: int, compile_model: bool = False) -> ProjectStep:
    """The loop's parts as :func:`fdsml.training.pretrain.pretrain` builds them, and ``batches`` batches timed through its loader."""
    fractals = parse_fractals_params(params["fractals"])
    table, _ = generate_table(fractals.spec)
    split = split_table(table, fractals.holdout, fractals.spec.settings.seed)
    config = parse_pretrain_params(merged(params["pretrain"], overrides) | {"live_dir": None})
    config = replace(config, train=replace(config.train, amp=amp, compile=compile_model, device="cpu"))
    context = distributed.setup("cpu")
    plan = plan_pretrain(config, len(split.training), 1).check()
    dataset = TrainingRows(build_fractal_dataset(table, fractals.spec, config, None), split)
    sampler = build_batch_sampler(dataset.labels, config, context, plan)
    configure_torch(config.train, context)
    model = prepare_model(build_pretrain_model(config, len(split.training_classes), fractals.spec.size), config.train, context)
    objective = build_objective(config, len(split.training_classes), model.output_dim)
    optimizer = build_optimizer(model, objective, config.optimizer, plan.learning_rate)
    parts = Resumable(model, objective, optimizer, build_scheduler(optimizer, config.optimizer, plan, 0))
    run = _Run(parts, config.train, config.optimizer, plan, context, None, "", None, None, progress=tqdm(disable=True))
    prefetch = Prefetcher(context.device, model_input=getattr(dataset, "model_input", None))
    loader = prefetch(islice(epochs(dataset, EpochBatches(sampler)), batches + 1))
    staged, data_s = [], []
    for _ in range(batches + 1):  # the first batch pays one-off costs (Numba, caches)
        started = time.perf_counter()
        staged.append(next(loader))
        data_s.append(time.perf_counter() - started)
    model.train()
    return ProjectStep(run, wrap_model(model, config.train, context), staged[1:], data_s[1:])


def epochs(dataset, batches: EpochBatches):
    """The loader's batches epoch after epoch, as the loop reads them (a small table has few batches per epoch)."""
    loader = epoch_loader(dataset, batches, num_workers=0)
    for epoch in count():
        batches.start(epoch)
        yield from loader


@dataclass
class BareStep:
    """timm's model, a plain loss, backward and SGD on the project's batches, under the same autocast."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    batches: list
    autocast: bool
    classes: bool

    def __call__(self, index: int) -> tuple[float, float]:
        batch = self.batches[index % len(self.batches)].batch
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            output = self.model(batch["image"])
        loss = F.cross_entropy(output.float(), batch["label"]) if self.classes else output.float().square().mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return time.perf_counter() - started, 0.0


def bare_step(project: ProjectStep, backbone: str, img_size: int) -> BareStep:
    """The bare loop on ``project``'s batches and in its precision: timm's ``backbone`` with the project model's output size."""
    torch.manual_seed(0)
    model = project.run.parts.model
    outputs, classes = model.output_dim, model.config.get("head") == "classifier"
    kwargs = {"img_size": img_size} if "vit" in backbone else {}
    model = timm.create_model(backbone, num_classes=outputs, **kwargs).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=1e-4)
    return BareStep(model, optimizer, project.batches, project.run.computes_in.autocast, classes)


def median_steps(steps: dict, rounds: int, warmup: int = 2) -> dict[str, dict[str, float]]:
    """Median seconds (and mining seconds) of each step, the steps alternating round by round after ``warmup`` rounds."""
    timed = interleaved(steps, rounds, warmup)
    return {name: {key: statistics.median(row[part] for row in rows) for part, key in enumerate(("step_s", "mining_s"))}
            for name, rows in timed.items()}


def compile_pays(params: dict, args) -> None:
    """Eager against compiled steps of the environment's objective: compile seconds, step times, the net over its run."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cold-")
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(args.threads))
    amp = PRECISIONS[args.precisions[0]]
    eager = project_step(params, {}, amp, args.batches)
    compiled = project_step(params, {}, amp, args.batches, compile_model=True)
    started = time.perf_counter()
    for index in range(FIRST_STEPS):
        compiled(index)
    first_steps = time.perf_counter() - started
    medians = median_steps({"eager": eager, "compiled": compiled}, args.rounds)
    eager_s, compiled_s = medians["eager"]["step_s"], medians["compiled"]["step_s"]
    compile_s, saved, planned = first_steps - FIRST_STEPS * compiled_s, eager_s - compiled_s, params["pretrain"]["train"]["max_steps"]
    print(f"conf/{args.env}, train.amp {str(amp).lower()} ({eager.run.computes_in}), {args.threads} thread(s), median of {args.rounds} interleaved steps")
    print(f"  compile (cold cache, first {FIRST_STEPS} steps less {FIRST_STEPS} compiled steps): {compile_s:.1f} s")
    print(f"  eager step {1e3 * eager_s:.0f} ms, compiled step {1e3 * compiled_s:.0f} ms, compiled / eager {compiled_s / eager_s:.2f}")
    print(f"  breaks even after {compile_s / saved:,.0f} steps" if saved > 0 else "  the compiled step is not faster: compiling never pays")
    if planned:
        print(f"  over the planned {planned:,} steps: {planned * saved - compile_s:+,.0f} s net (positive: compiling pays)")
    print(f"torch {torch.__version__}")


def one_run(table, fractals, config, steps: int) -> dict[str, float]:
    """Seconds of one run of ``steps`` steps from a fresh folder: whole, data, step, validation, rest; its validations."""
    with tempfile.TemporaryDirectory() as folder:
        run = replace(config, run_dir=folder, train=replace(config.train, max_steps=steps))
        started = time.perf_counter()
        _, history = pretrain(table, fractals.spec, run, split=split_table(table, fractals.holdout, fractals.spec.settings.seed))
        whole = time.perf_counter() - started
    parts = {"data": history["data_s"].sum(), "step": history["step_s"].sum(), "validation": history["validation_s"].sum()}
    return {"whole": whole, **parts, "rest": whole - sum(parts.values()), "validations": int(history["validation_s"].notna().sum())}


def projected(run: dict[str, float], steps: int, full_steps: int, every: int | None) -> float:
    """Seconds of a run of ``full_steps`` from one of ``steps``: its time per step and per validation, the rest as it is."""
    validations = full_steps // every + 1 + (full_steps % every != 0) if every else 0
    per_validation = run["validation"] / max(run["validations"], 1)
    return (run["data"] + run["step"]) / steps * full_steps + per_validation * validations + run["rest"]


def whole_runs(params: dict, args) -> None:
    """Whole runs of ``args.run`` steps in each precision, alternating: each part's median seconds and ratio, and the
    full run projected."""
    config = parse_pretrain_params(params["pretrain"] | {"live_dir": None})
    fractals = parse_fractals_params(params["fractals"])
    table, _ = generate_table(fractals.spec)
    full_steps = plan_pretrain(config, len(split_table(table, fractals.holdout, fractals.spec.settings.seed).training), 1).total_steps
    every = config.validation.every
    config = replace(config, train=replace(config.train, device="cpu"), validation=replace(config.validation, every=args.run))
    configs = {name: replace(config, train=replace(config.train, amp=PRECISIONS[name])) for name in args.precisions}
    timed = interleaved({name: lambda _, c=c: one_run(table, fractals, c, args.run) for name, c in configs.items()}, args.rounds)
    medians = {name: {key: statistics.median(run[key] for run in runs) for key in runs[0]} for name, runs in timed.items()}
    result = {"env": args.env, "objective": config.objective, "steps": args.run, "rounds": args.rounds, "threads": args.threads,
              "load average (1 min, at the end)": os.getloadavg()[0]}  # fmt: skip
    result |= {f"{name} computes in": str(precision(c.train, torch.device("cpu"), build_objective(c, 2, 16))) for name, c in configs.items()}
    full = {name: projected(medians[name], args.run, full_steps, every) for name in configs}
    for part in ("whole", "data", "step", "validation", "rest"):
        result[f"{part} s"] = ", ".join(f"{name} {medians[name][part]:.1f}" for name in configs)
    result[f"full run of {full_steps} steps, projected s"] = ", ".join(f"{name} {full[name]:.0f}" for name in configs)
    if len(configs) == 2:
        slow, fast = medians["float32"], medians["bf16"]
        result |= {f"{part}: float32 / bf16": round(slow[part] / max(fast[part], 1e-9), 2) for part in ("whole", "step", "validation", "rest")}
        result["steps with their data: float32 / bf16"] = round((slow["data"] + slow["step"]) / (fast["data"] + fast["step"]), 2)
        result["full run: float32 / bf16"] = round(full["float32"] / full["bf16"], 2)
    print_result(result, args.json)


def main() -> None:
    command = parser(__doc__, "--json", "--threads", threads=1)
    command.add_argument("--env", default="base", help="the configuration environment whose pre-training step is measured")
    command.add_argument("--rounds", type=int, default=8)
    command.add_argument("--batches", type=int, default=4, help="distinct batches the steps cycle through")
    command.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=list(PRECISIONS))
    command.add_argument("--compile", action="store_true", help="eager against torch.compile instead (the first precision)")
    command.add_argument("--run", type=int, metavar="STEPS", help="whole pre-training runs of STEPS steps instead")
    args = command.parse_args()
    use_threads(args.threads)
    params = parameters(args.env)
    if args.run:
        return whole_runs(params, args)
    if args.compile:
        return compile_pays(params, args)
    size = parse_fractals_params(params["fractals"]).spec.size
    backbone = params["pretrain"]["model"]["backbone"]
    steps, data, computed = {}, {}, {}
    for objective, overrides in OBJECTIVES.items():
        for name in args.precisions:
            project = project_step(params, overrides, PRECISIONS[name], args.batches)
            steps[(objective, name, "project")] = project
            steps[(objective, name, "bare")] = bare_step(project, backbone, size)
            data[(objective, name)] = statistics.median(project.data_s)
            computed[(objective, name)] = str(project.run.computes_in)
    medians = median_steps(steps, args.rounds)
    print(f"conf/{args.env}: {backbone} at {size} px, batch {len(project.batches[0].batch['image'])}, "
          f"{args.threads} thread(s), median of {args.rounds} interleaved steps\n")  # fmt: skip
    print("| objective | train.amp (computes in) | project ms | bare timm ms | project / bare | mining % of step | data path % of step |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (objective, name), data_s in data.items():
        mine, bare = medians[(objective, name, "project")], medians[(objective, name, "bare")]["step_s"]
        whole = mine["step_s"] + data_s
        print(f"| {objective} | {str(PRECISIONS[name]).lower()} ({computed[(objective, name)]}) | {1e3 * mine['step_s']:.0f} | {1e3 * bare:.0f} "
              f"| {mine['step_s'] / bare:.2f} | {100 * mine['mining_s'] / whole:.1f} | {100 * data_s / whole:.1f} |")  # fmt: skip
    if len(args.precisions) == 2:
        print("\namp true / amp false step time (same run; an objective that declares no bf16 part computes in float32 in both):")
        for objective in OBJECTIVES:
            for side in ("project", "bare"):
                ratio = medians[(objective, "bf16", side)]["step_s"] / medians[(objective, "float32", side)]["step_s"]
                print(f"  {objective}, {side}: {ratio:.2f}")
    print(f"\ntorch {torch.__version__}, timm {timm.__version__}")


if __name__ == "__main__":
    main()
