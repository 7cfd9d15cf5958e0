"""Does bf16 autocast on the CPU change what the project concludes? Pre-training and fine-tuning, bf16 against float32.

    python benchmarks/precision_parity.py --env base --seeds 0 1 2 --retrieval   # the default pre-training (+ a fine-tuned retrieval)
    python benchmarks/precision_parity.py --env cpu --seeds 0                     # conf/cpu's hour (about 22 CPU minutes in float32)
    python benchmarks/precision_parity.py --env cpu --seeds 0 --report            # the stored results' table, nothing run

Each arm pre-trains with ``--env``'s parameters (conf/base overlaid with the environment, as ``kedro run
--env``), its seed and ``pretrain.train.amp`` false (float32) or true (bf16 on a CPU with native bf16:
:mod:`fdsml.training.precision`), and reads the run's last validation: the frozen probe's Recall@1 and the
held-out ordering agreement per candidate filter. With ``--retrieval`` the pre-trained model is fine-tuned
with conf/base's (or the environment's) retrieval recipe in the same precision and seed, and its test
Recall@1 and MAP@R read. Arms run one at a time; each result is stored under ``--out`` (atomically) as
soon as it is measured and reused while its definition is unchanged, so an interrupted study resumes.
The table gives each metric's mean ± standard deviation over seeds per precision and the paired
difference bf16 - float32; the runs' step seconds (the machine may be shared) come with it. Each seed's
validations are then compared step by step from the runs' checkpoints, also of runs not finished.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import statistics
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch
from kedro.config import OmegaConfigLoader

from fdsml.atomic import atomic_path
from fdsml.data.holdout import split_table
from fdsml.families.generation import generate_table
from fdsml.models.starting_points import PRETRAINED, StartingPoint
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.training.pretrain import parse_pretrain_params, pretrain
from fdsml.training.retrieval import compare_starting_points, parse_retrieval_params

PRECISIONS = {"float32": False, "bf16": True}  # the name of an arm's precision -> its train.amp


def _set(tree: dict, dotted: str, value) -> dict:
    """``tree`` with ``dotted`` (``a.b.c``) set to ``value`` (a copy along the path)."""
    head, _, rest = dotted.partition(".")
    return {**tree, head: _set(tree.get(head, {}), rest, value) if rest else value}


def last_validation(history) -> dict[str, float]:
    """The last measured value of every validation column of a pre-training history (its end point)."""
    columns = [column for column in history.columns if column.startswith("val_") and history[column].notna().any()]
    return {column: float(history[column].dropna().iloc[-1]) for column in columns}


def run_arm(params: dict, seed: int, amp: bool, work: Path, retrieval: bool) -> dict:
    """Pre-train (and fine-tune) one arm; its validation end point, retrieval metrics and timings."""
    fractals = parse_fractals_params(params["fractals"])
    table, _ = generate_table(fractals.spec)
    pretrain_params = _set(_set(params["pretrain"], "train.seed", seed), "train.amp", amp)
    config = parse_pretrain_params(pretrain_params | {"run_dir": str(work / "pretrain"), "live_dir": None})
    started = time.perf_counter()
    payload, history = pretrain(table, fractals.spec, config, split=split_table(table, fractals.holdout, fractals.spec.settings.seed))
    result = {
        "precision": torch.load(next((work / "pretrain").glob("*/last.pt")), weights_only=True)["precision"],
        "pretrain_seconds": round(time.perf_counter() - started, 1),
        "step_seconds": round(float((history["data_s"] + history["step_s"]).sum()), 1),
        **last_validation(history),
    }
    if retrieval:
        retrieval_params = _set(_set(params["retrieval"], "train.amp", amp), "seeds", [seed])
        config = parse_retrieval_params(retrieval_params | {"run_dir": str(work / "finetune"), "live_dir": None})
        start = StartingPoint("pretrained", PRETRAINED, config.starts[0].backbone)
        metrics, _, _ = compare_starting_points(replace(config, starts=(start,)), pretrained=payload)
        result.update({f"finetuned_{key}": value for key, value in metrics[start.name]["mean"].items()})
    return result


def trajectories(out: Path, env: str, seed: int) -> str:
    """Markdown: every validation both arms of ``seed`` reached, read from their runs' checkpoints (also of a run
    still training or stopped early): the steps where the two precisions can be compared."""
    rows = {}
    for name in PRECISIONS:
        checkpoints = sorted((out / "runs" / f"{env}_{name}_{seed}" / "pretrain").glob("*/last.pt"))
        if checkpoints:
            history = pd.DataFrame(torch.load(checkpoints[-1], weights_only=True)["history"])
            validated = history[history.get("validation_s", pd.Series(dtype=float)).notna()]
            rows[name] = validated.set_index("step")[[c for c in validated.columns if c.startswith("val_")]]
    if len(rows) < 2:
        return f"conf/{env} seed {seed}: not both precisions have a checkpoint yet"
    both = rows["float32"].index.intersection(rows["bf16"].index)
    metrics = [m for m in rows["float32"].columns if m in rows["bf16"].columns and rows["float32"][m].notna().any()]
    lines = [f"conf/{env} seed {seed}, float32 / bf16 at each validation both reached", "",
             "| step | " + " | ".join(metrics) + " |", "|---:|" + "---:|" * len(metrics)]  # fmt: skip
    for step in both:
        cells = [f"{rows['float32'].at[step, m]:.3f} / {rows['bf16'].at[step, m]:.3f}" for m in metrics]
        lines.append(f"| {int(step)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mean_sd(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.4f}" if values else "-"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def table(results: dict, env: str, seeds: list[int]) -> str:
    """Markdown: each metric's mean ± sd per precision over ``seeds`` and the paired difference bf16 - float32."""
    arms = {name: [results[f"{env}/{name}/{seed}"] for seed in seeds if f"{env}/{name}/{seed}" in results] for name in PRECISIONS}
    metrics = sorted({key for rows in arms.values() for row in rows for key, value in row.items() if isinstance(value, float)})
    lines = [f"conf/{env}, seeds {seeds}", "", "| metric | float32 | bf16 | bf16 - float32 (paired) |", "|---|---:|---:|---:|"]
    for metric in metrics:
        paired = [
            results[f"{env}/bf16/{seed}"][metric] - results[f"{env}/float32/{seed}"][metric]
            for seed in seeds
            if metric in results.get(f"{env}/bf16/{seed}", {}) and metric in results.get(f"{env}/float32/{seed}", {})
        ]
        column = [_mean_sd([row[metric] for row in arms[name] if metric in row]) for name in PRECISIONS]
        lines.append(f"| {metric} | {column[0]} | {column[1]} | {_mean_sd(paired)} |")
    return "\n".join(lines)


def digest(params: dict) -> str:
    """The digest of the parameters an arm reads (its seed and precision are in its key)."""
    used = {name: params[name] for name in ("fractals", "pretrain", "retrieval")}
    return hashlib.sha256(json.dumps(used, sort_keys=True, default=str).encode()).hexdigest()[:16]


def source_tree() -> str:
    """The committed tree of ``src/`` plus a digest of uncommitted changes to it: the code that computes an arm."""
    tree = subprocess.run(["git", "rev-parse", "HEAD:src"], capture_output=True, text=True).stdout.strip()
    changes = subprocess.run(["git", "diff", "HEAD", "--", "src"], capture_output=True, text=True).stdout
    return f"{tree[:12]}+{hashlib.sha256(changes.encode()).hexdigest()[:8]}" if changes else tree[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="base", help="the configuration environment (base, cpu, ...)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--retrieval", action="store_true", help="also fine-tune each pre-trained model (retrieval recipe)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="data/07_model_output/precision_parity")
    parser.add_argument("--report", action="store_true", help="print the stored results' table; run nothing")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    params = OmegaConfigLoader("conf", base_env="base", default_run_env=args.env)["parameters"]
    out = Path(args.out)
    store = out / "results.json"
    results = json.loads(store.read_text()) if store.exists() else {}
    definition = {"retrieval": args.retrieval, "threads": args.threads, "parameters": digest(params), "code": source_tree()}
    for seed in [] if args.report else args.seeds:
        for name, amp in PRECISIONS.items():
            key = f"{args.env}/{name}/{seed}"
            if results.get(key, {}).get("definition") == definition:
                continue
            results[key] = {"definition": definition, **run_arm(params, seed, amp, out / "runs" / key.replace("/", "_"), args.retrieval)}
            with atomic_path(store) as temporary:
                temporary.write_text(json.dumps(results, indent=1, sort_keys=True))
            logging.info("%s: %s", key, results[key])
    print(table(results, args.env, args.seeds))
    for seed in args.seeds:
        print("\n" + trajectories(out, args.env, seed))
    print(f"\ntorch {torch.__version__}, threads {torch.get_num_threads()}; each arm's pre-training computed in:")
    for seed in args.seeds:
        print("  " + ", ".join(f"{key}: {results[key]['precision']}" for name in PRECISIONS if (key := f"{args.env}/{name}/{seed}") in results))


if __name__ == "__main__":
    main()
