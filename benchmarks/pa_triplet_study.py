"""Is PA-Triplet's ``same`` ordering learned, and what limits it? Training triplet accuracy and held-out agreement per variant and seed.

    python benchmarks/pa_triplet_study.py                          # every arm, seeds 0 1 2 (about 2 h on 2 loaded CPU cores)
    python benchmarks/pa_triplet_study.py --arms default method    # some arms
    python benchmarks/pa_triplet_study.py --seeds 0                # one seed
    python benchmarks/pa_triplet_study.py --summarise-only         # the table from the complete runs

Every arm pre-trains the embedded default (conf/base: 10 x 20 fractals at 64 px) with its
overrides and nothing else changed, on the same table and split, once per seed
(``pretrain.train.seed``: the initialisation, the batches, the noise and the held-out triplets):
``default`` is conf/base as it is, ``method`` is the method's own ``same`` (every triplet ordered,
near-ties included), then one candidate cause changed at a time (near-ties, normalisation and
dimension of the embedding, learning rate and schedule, margin, number of steps), then ``each``
and FDSL for comparison. Each arm reports the training triplet accuracy (the history's
``triplet_accuracy_<filter>``, mean over the first and the last tenth of the steps) and the
held-out validation (:mod:`fdsml.evaluation.pretrain_validation`, with :data:`HELDOUT_TRIPLETS`
triplets per filter for a tighter estimate): ``same`` and ``each`` agreement and the frozen
trunk's probe Recall@1 on the embedded real retrieval set (Omniglot), at initialisation (the
history's step 0) and at the last step.

Each run (arm and seed) is a trial of the Optuna study ``pa_triplet_study`` (:mod:`fdsml.tuning.arms`; by
default ``data/07_model_output/studies/pa_triplet_study.db``, ``--storage`` for a database or journal file
that several machines share), keyed by the digest of its definition and of the code that computes it: a
COMPLETE run is reused only while both are unchanged, a failed one runs again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import time
from functools import partial
from pathlib import Path

from pretraining_budget import _git_commit  # the budget study's helper (same folder)

from fdsml.config import with_overlay
from fdsml.tuning.arms import arm_results, open_arms_study, run_arms

ARMS = {
    "default": {},
    "method": {"pa_triplet": {"min_relative_gap": 0.0}},
    "gap_0.2": {"pa_triplet": {"min_relative_gap": 0.2}},
    "gap_0.3": {"pa_triplet": {"min_relative_gap": 0.3}},
    "unnormalised": {"pa_triplet": {"normalize_embeddings": False}},
    "dim_32": {"model": {"embedding_dim": 32}},
    "dim_512": {"model": {"embedding_dim": 512}},
    "lr_0.1": {"optimizer": {"base_lr": 0.1}},
    "lr_2": {"optimizer": {"base_lr": 2.0}},
    "lr_constant": {"optimizer": {"schedule": "constant"}},
    "margin_0.05": {"pa_triplet": {"margin": 0.05}},
    "margin_0.5": {"pa_triplet": {"margin": 0.5}},
    "fresh": {"data": {"instances": "fresh"}},
    "epochs_24": {"train": {"epochs": 24}},
    "epochs_48": {"train": {"epochs": 48}},
    "each": {"pa_triplet": {"filter": "each"}},
    "fdsl": {"objective": "fdsl"},
}
"""Overrides of conf/base ``pretrain`` per arm; ``default`` is conf/base as it is, ``method`` the method's own ``same``."""
HELDOUT_TRIPLETS = 4000
"""Held-out triplets per filter (conf/base's count unless larger): binomial standard error about 0.008 at 0.65."""
CODE_MODULES = ("fdsml.training.pretrain", "fdsml.training.objectives", "fdsml.losses.pa_triplet", "fdsml.evaluation.pretrain_validation")
SHOWN = (
    ("val_unseen_agreement_same", "held-out same"),
    ("val_unseen_agreement_each", "held-out each"),
    ("val_probe_recall_at_1", "probe R@1 (Omniglot)"),
)


def code_version() -> str:
    from fdsml import reuse

    return hashlib.sha256("".join(reuse.code_digest(module) for module in CODE_MODULES).encode()).hexdigest()[:16]


def conf_base() -> dict:
    from kedro.config import OmegaConfigLoader

    return OmegaConfigLoader("conf", base_env="base", default_run_env="base")["parameters"]


def arm_definition(params: dict, arm: str, seed: int) -> dict:
    """The arm's whole configuration: conf/base ``fractals``, and ``pretrain`` with the arm's overrides, the seed and at
    least :data:`HELDOUT_TRIPLETS` held-out triplets (a stored run is reused only while conf/base still gives it)."""
    merged = with_overlay(params["pretrain"], ARMS[arm])
    triplets = max(merged["validation"]["triplets"], HELDOUT_TRIPLETS)
    pretrain = with_overlay(merged, {"train": {"seed": seed}, "validation": {"triplets": triplets}, "live_dir": None})
    return {"arm": arm, "seed": seed, "overrides": ARMS[arm], "pretrain": pretrain, "fractals": params["fractals"]}


def run_fingerprints(params: dict, arms: list[str], seeds: list[int]) -> dict[str, str]:
    """Each run's name (``<arm>_seed<seed>``) and the digest of its definition and code."""
    code = code_version()
    return {
        f"{arm}_seed{seed}": hashlib.sha256(json.dumps([arm_definition(params, arm, seed), code], sort_keys=True).encode()).hexdigest()[:16]
        for seed in seeds
        for arm in arms
    }


def run_arm(out: str, name: str) -> tuple[float, dict]:
    """Pre-train one arm with one seed (the history's step 0 is the initialisation's validation); its held-out
    ``same`` agreement at the end, and its result."""
    arm, seed = name.rsplit("_seed", 1)[0], int(name.rsplit("_seed", 1)[1])
    import torch

    torch.set_num_threads(1)
    from fdsml.data.holdout import split_table
    from fdsml.families.generation import generate_table
    from fdsml.data.fractals_config import parse_fractals_params
    from fdsml.training import pretrain as pretraining

    params = conf_base()
    definition = arm_definition(params, arm, seed)
    fractals = parse_fractals_params(params["fractals"])
    spec = fractals.spec
    table, _ = generate_table(spec)
    split = split_table(table, fractals.holdout, spec.settings.seed)
    run_dir = Path(out) / "runs" / name
    config = pretraining.parse_pretrain_params(definition["pretrain"] | {"run_dir": str(run_dir)})
    started = time.perf_counter()
    _, history = pretraining.pretrain(table, spec, config, split=split)
    result = {
        "definition": definition,
        "commit": _git_commit(),
        "seconds": round(time.perf_counter() - started, 1),
        "history": json.loads(history.to_json(orient="records")),
    }
    summary = run_summary(result)
    logging.info("%s seed %d: %s", arm, seed, summary)
    return summary["val_unseen_agreement_same"][1], result


def run_summary(result: dict) -> dict:
    """One run: start and end of the training triplet accuracy (first / last tenth of the steps) and of the held-out metrics."""
    initial, *steps = result["history"]
    accuracy_key = next((key for key in steps[0] if key.startswith("triplet_accuracy_")), None)
    tenth = max(len(steps) // 10, 1)

    def mean(rows, key):
        return sum(row[key] for row in rows) / len(rows)

    row = {"steps": len(steps), "seconds": result["seconds"], "commit": result["commit"]}
    row["train_accuracy"] = None if accuracy_key is None else (mean(steps[:tenth], accuracy_key), mean(steps[-tenth:], accuracy_key))
    for key, _ in SHOWN:
        row[key] = (initial[key], steps[-1][key])
    return row


def _mean_sd(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((value - mean) ** 2 for value in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return mean, sd


def _pair(pairs: list | None) -> str:
    """Start -> end, means over the seeds."""
    if not pairs or pairs[0] is None:
        return "n/a (no triplets)"
    starts, ends = zip(*pairs)
    return f"{_mean_sd(starts)[0]:.3f} -> {_mean_sd(ends)[0]:.3f}"


def _gain(pairs: list, triplets: int) -> str:
    """End minus start per seed, and the gain over 3 binomial standard errors of the agreement estimate."""
    gains = [end - start for start, end in pairs]
    error = max(math.sqrt(end * (1 - end) / triplets) for _, end in pairs)
    mean, sd = _mean_sd(gains)
    return f"{mean:+.3f} ± {sd:.3f} ({', '.join(f'{gain:+.3f}' for gain in gains)}); {min(gains) / (3 * error):.1f}"


def summarise(results: list[dict]) -> str:
    """The Markdown table: one row per arm, means over its seeds."""
    by_arm: dict[str, list[dict]] = {}
    for result in results:
        by_arm.setdefault(result["definition"]["arm"], []).append(result)
    header = (
        "| arm | overrides | seeds | steps | min | training triplet accuracy | "
        + " | ".join(title for _, title in SHOWN)
        + " | same gain per seed; min gain / 3 SE |\n|---|---|---|---:|---:|---|"
        + "---|" * len(SHOWN)
        + "---|\n"
    )
    lines = []
    for arm in ARMS:
        if arm not in by_arm:
            continue
        runs = sorted(by_arm[arm], key=lambda result: result["definition"]["seed"])
        rows = [run_summary(result) for result in runs]
        overrides = json.dumps(ARMS[arm]) if ARMS[arm] else "conf/base"
        seeds = ", ".join(str(result["definition"]["seed"]) for result in runs)
        minutes = sum(row["seconds"] for row in rows) / len(rows) / 60
        accuracy = None if rows[0]["train_accuracy"] is None else [row["train_accuracy"] for row in rows]
        cells = [_pair(accuracy)] + [_pair([row[key] for row in rows]) for key, _ in SHOWN]
        triplets = runs[0]["definition"]["pretrain"]["validation"]["triplets"]
        gain = _gain([row["val_unseen_agreement_same"] for row in rows], triplets)
        lines.append(f"| {arm} | `{overrides}` | {seeds} | {rows[0]['steps']} | {minutes:.1f} | " + " | ".join(cells) + f" | {gain} |")
    return header + "\n".join(lines) + "\n"


def report_markdown(table: str) -> str:
    return (
        "# PA-Triplet: what the loss learns\n\n"
        "Each arm changes its overrides against the embedded default (conf/base: 10 x 20 fractals at 64 px, ResNet-18, "
        "`same`, near-ties within 10 % left out); `method` is the method's own `same` (every triplet ordered); `each` and "
        "FDSL share the table, split, seeds and budget. Values are means over the seeds (`pretrain.train.seed`), "
        "start -> end. Training triplet accuracy: fraction of the batch's mined triplets (near-ties included, whether or "
        "not the loss sees them) whose positive is already the nearer in the embedding (mean of the first and of the last "
        "tenth of the steps). Held-out: agreement of the embedding's ordering with the descriptor's on "
        f"{HELDOUT_TRIPLETS} fixed held-out triplets per filter, and the frozen trunk's k-NN Recall@1 on the embedded real "
        "retrieval set (Omniglot, 500 images), at initialisation -> at the last step. The last column: the held-out "
        "`same` gain (end - start) as mean ± sd over the seeds, each seed's, and the smallest over 3 binomial standard "
        "errors of the end's estimate (above 1: every seed clearly above its start). `min`: minutes per run on one "
        "thread of a shared, loaded 2-core machine.\n\n"
        + table
        + "\nReproduce: `python benchmarks/pa_triplet_study.py` (runs already complete with the same definition and code are reused).\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="pretrain.train.seed values")
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel, one torch thread each")
    parser.add_argument("--storage", help="the runs' Optuna storage: a database URL or journal file (default: data/07_model_output/studies/pa_triplet_study.db)")
    parser.add_argument("--out", default="benchmarks/results/pa_triplet_study", help="the runs' folders")
    parser.add_argument("--report-dir", default="data/08_reporting", help="where the table goes (the report reads it)")
    parser.add_argument("--summarise-only", action="store_true", help="write the table from the complete runs, run nothing")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    for noisy in ("fdsml", "kedro", "pytorch_metric_learning", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    params = conf_base()
    wanted = run_fingerprints(params, args.arms, args.seeds)
    failed = [] if args.summarise_only else run_arms("pa_triplet_study", wanted, partial(run_arm, args.out), args.jobs, args.storage)
    every = run_fingerprints(params, list(ARMS), args.seeds)  # the table: every arm complete with these seeds
    table = summarise(arm_results(open_arms_study("pa_triplet_study", args.storage), every)["result"].tolist())
    from fdsml.atomic import atomic_path

    with atomic_path(Path(args.report_dir) / "pa_triplet_study.md") as temporary:
        temporary.write_text(report_markdown(table))
    print(table)
    if failed:
        raise SystemExit(f"run(s) {', '.join(failed)} failed (logged above); run the command again to rerun them")


if __name__ == "__main__":
    main()
