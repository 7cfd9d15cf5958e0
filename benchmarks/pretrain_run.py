"""A whole pre-training run in float32 against bf16, side by side: the steps, the validations and the rest.

    python benchmarks/pretrain_run.py --env cpu --steps 200 --rounds 2     # conf/cpu's FDSL at 48 px
    python benchmarks/pretrain_run.py --env cpu --objective pa_triplet      # another objective in its declared precision

Each round runs :func:`fdsml.training.pretrain.pretrain` for ``--steps`` steps (validation at the start and the end,
as the environment configures it, conf/cpu's probe over all 2,120 test images) from a fresh run folder, once per
precision, alternating (float32, bf16, float32, bf16, ...) so that load on a shared machine hits both alike. The
codes table is generated once before the rounds. A run's seconds split into the steps (the history's ``data_s``:
loading and rendering; ``step_s``: forward, backward, update), its validations (``validation_s``) and the rest
(start-up, logging, checkpoints). ``bf16`` is ``train.amp: true``: bf16 in the parts the objective declares, where
the CPU computes bf16 natively (the first line of each run says which). The full run's seconds are projected from the
medians: the environment's ``max_steps`` steps and its validations (every ``validation.every`` steps and at the end).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import replace

import torch

from fdsml.data.fractals_config import parse_fractals_params
from fdsml.data.holdout import split_table
from fdsml.families.generation import generate_table
from fdsml.training.precision import precision
from fdsml.training.pretrain import build_objective, parse_pretrain_params, pretrain
from timing import interleaved, parameters, parser, print_result, use_threads

PRECISIONS = {"float32": False, "bf16": True}  # -> train.amp


def one_run(table, fractals, config, steps: int) -> dict[str, float]:
    """Seconds of one run of ``steps`` steps, from a fresh folder: whole, data, step, validation, rest."""
    with tempfile.TemporaryDirectory() as folder:
        run = replace(config, run_dir=folder, train=replace(config.train, max_steps=steps))
        split = split_table(table, fractals.holdout, fractals.spec.settings.seed)
        started = time.perf_counter()
        _, history = pretrain(table, fractals.spec, run, split=split)
        whole = time.perf_counter() - started
    parts = {"data": history["data_s"].sum(), "step": history["step_s"].sum(), "validation": history["validation_s"].sum()}
    return {"whole": whole, **parts, "rest": whole - sum(parts.values()), "validations": int(history["validation_s"].notna().sum())}


def projected(medians: dict[str, float], steps: int, full_steps: int, every: int | None) -> float:
    """Seconds of a full run of ``full_steps`` from this run's medians: per-step time, per-validation time, the rest as is."""
    validations = full_steps // every + 1 + (full_steps % every != 0) if every else 0
    per_validation = medians["validation"] / max(medians["validations"], 1)
    return (medians["data"] + medians["step"]) / steps * full_steps + per_validation * validations + medians["rest"]


def main() -> None:
    command = parser(__doc__, "--json", "--threads", threads=1)
    command.add_argument("--env", default="cpu", help="the configuration environment whose pre-training runs")
    command.add_argument("--objective", help="pretrain.objective (none: the environment's)")
    command.add_argument("--steps", type=int, default=200, help="steps of each run (validation at the start and the end)")
    command.add_argument("--rounds", type=int, default=2)
    args = command.parse_args()
    use_threads(args.threads)
    params = parameters(args.env)
    pretrain_params = params["pretrain"] | ({"objective": args.objective} if args.objective else {})
    config = parse_pretrain_params(pretrain_params | {"live_dir": None})
    full_steps, every = config.train.max_steps, config.validation.every
    config = replace(config, train=replace(config.train, device="cpu"), validation=replace(config.validation, every=args.steps))
    fractals = parse_fractals_params(params["fractals"])
    table, _ = generate_table(fractals.spec)
    configs = {name: replace(config, train=replace(config.train, amp=amp)) for name, amp in PRECISIONS.items()}
    computes_in = {name: str(precision(c.train, torch.device("cpu"), build_objective(c, 2, 16))) for name, c in configs.items()}
    timed = interleaved({name: lambda _, c=c: one_run(table, fractals, c, args.steps) for name, c in configs.items()}, args.rounds)
    medians = {name: {key: statistics.median(run[key] for run in runs) for key in runs[0]} for name, runs in timed.items()}
    result = {
        "env": args.env, "objective": config.objective, "steps": args.steps, "rounds": args.rounds, "threads": args.threads,
        "load average": os.getloadavg()[0], **{f"computes in ({name})": computes_in[name] for name in PRECISIONS},
    }  # fmt: skip
    for part in ("whole", "data", "step", "validation", "rest"):
        result[f"{part} s (float32, bf16)"] = f"{medians['float32'][part]:.1f}, {medians['bf16'][part]:.1f}"
        result[f"{part}: float32 / bf16"] = round(medians["float32"][part] / max(medians["bf16"][part], 1e-9), 2)
    result["steps img/s: float32 / bf16"] = round(
        (medians["float32"]["data"] + medians["float32"]["step"]) / (medians["bf16"]["data"] + medians["bf16"]["step"]), 2
    )
    full = {name: projected(medians[name], args.steps, full_steps, every) for name in PRECISIONS}
    result[f"full run of {full_steps} steps, projected s (float32, bf16)"] = f"{full['float32']:.0f}, {full['bf16']:.0f}"
    result["full run: float32 / bf16"] = round(full["float32"] / full["bf16"], 2)
    print_result(result, args.json)


if __name__ == "__main__":
    main()
