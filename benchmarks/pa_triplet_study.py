"""Is PA-Triplet's ``same`` ordering learned, and what limits it? Training triplet accuracy and held-out agreement per variant.

    python benchmarks/pa_triplet_study.py                       # every arm at both scales (about 2 h on 2 loaded CPU cores)
    python benchmarks/pa_triplet_study.py --scale default       # the embedded default only (conf/base as it is)
    python benchmarks/pa_triplet_study.py --arms same same_gap  # some arms
    python benchmarks/pa_triplet_study.py --summarise-only      # the table from the stored arms

Every arm pre-trains from conf/base with its overrides and nothing else changed, on the same table,
split, seed and budget: ``same`` as the method defines it (every triplet, margin 0.2, mean reducer),
then one candidate cause changed at a time (near-ties left out, the margin, the reducer, the
normalisation, the learning rate), then ``each`` and FDSL for comparison. Each arm reports, at the
start and the end, the training triplet accuracy (the history's ``triplet_accuracy_<filter>``,
mean over the first and last tenth of the logged steps) and the held-out validation
(:mod:`fdsml.evaluation.pretrain_validation`): ``same`` and ``each`` agreement, and the frozen
trunk's probe Recall@1 on the embedded real retrieval set (digits), at initialisation (the
freshly built model, same seed) and at the last step.

Two scales: ``default`` is conf/base unchanged (10 x 20 fractals at 64 px, 36 steps); ``grid`` is a
20 x 50 table at 32 px (1,000 points), 100 steps. Each arm's result is stored in
``<out>/arms/<scale>_<arm>.json`` with the digest of the code that computed it; a stored arm is
reused only while its definition and that code are unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import multiprocessing
import time
from pathlib import Path

from pretraining_budget import _git_commit, _merge, _write_json  # the budget study's helpers (same folder)

ARMS = {
    "same": {},
    "same_gap": {"pa_triplet": {"min_relative_gap": 0.1}},
    "same_gap_wide": {"pa_triplet": {"min_relative_gap": 0.3}},
    "same_margin": {"pa_triplet": {"margin": 0.05}},
    "same_nonzero": {"pa_triplet": {"reducer": "avg_nonzero"}},
    "same_unnormalised": {"pa_triplet": {"normalize_embeddings": False}},
    "same_lr": {"optimizer": {"base_lr": 2.0}},
    "same_gap_lr_low": {"pa_triplet": {"min_relative_gap": 0.1}, "optimizer": {"base_lr": 0.1}},
    "same_gap_lr_high": {"pa_triplet": {"min_relative_gap": 0.1}, "optimizer": {"base_lr": 2.0}},
    "each": {"pa_triplet": {"filter": "each"}},
    "fdsl": {"objective": "fdsl"},
}
"""Overrides of conf/base ``pretrain`` per arm; ``same`` is the method's definition (every triplet ordered)."""
METHOD_DEFINITION = {"pa_triplet": {"min_relative_gap": 0.0}}
"""Applied first to every arm, so an arm changes one thing against the method's own definition."""
SCALES = {
    "default": {"fractals": {}, "pretrain": {}},
    "grid": {
        "fractals": {"n_classes": 20, "instances_per_class": 50, "render": {"size": 32, "points": 1000}},
        "pretrain": {"train": {"max_steps": 100}, "validation": {"every": 100}},
    },
}
CODE_MODULES = ("fdsml.training.pretrain", "fdsml.evaluation.pretrain_validation", "fdsml.families.generation")
SHOWN = (("val_agreement_same", "held-out same"), ("val_agreement_each", "held-out each"), ("val_probe_recall_at_1", "probe R@1"))


def code_version() -> str:
    from fdsml import reuse

    return hashlib.sha256("".join(reuse.code_digest(module) for module in CODE_MODULES).encode()).hexdigest()[:16]


def arm_definition(scale: str, arm: str) -> dict:
    return {"scale": scale, "arm": arm, "overrides": _merge(METHOD_DEFINITION, ARMS[arm]), "study": SCALES[scale]}


def run_arm(task: tuple[str, str, str]) -> dict:
    """Pre-train one arm, with the validation at initialisation and at the end; store the result."""
    scale, arm, out = task
    import torch

    torch.set_num_threads(1)
    from kedro.config import OmegaConfigLoader

    from fdsml.data.holdout import split_table
    from fdsml.families.generation import generate_table
    from fdsml.pipelines.fractals.nodes import parse_fractals_params
    from fdsml.training import pretrain as pretraining

    definition = arm_definition(scale, arm)
    params = OmegaConfigLoader("conf", base_env="base", default_run_env="base")["parameters"]
    fractals = parse_fractals_params(_merge(params["fractals"], definition["study"]["fractals"]))
    spec = fractals.spec
    table, _ = generate_table(spec)
    split = split_table(table, fractals.holdout, spec.settings.seed)
    overrides = _merge(definition["study"]["pretrain"], definition["overrides"])
    run_dir = Path(out) / "runs" / f"{scale}_{arm}"
    config = pretraining.parse_pretrain_params(
        _merge(params["pretrain"], overrides) | {"run_dir": str(run_dir)}
    )
    started = time.perf_counter()
    validation = pretraining.build_validation(config, table, spec, None, split)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.train.seed)
        initial = pretraining.build_pretrain_model(config, len(split.training_classes), spec.size)
    at_start = validation(initial, 0)
    _, history = pretraining.pretrain(table, spec, config, split=split)
    result = {
        "definition": definition,
        "code": code_version(),
        "commit": _git_commit(),
        "seconds": round(time.perf_counter() - started, 1),
        "initial_validation": at_start,
        "history": json.loads(history.to_json(orient="records")),
    }
    _write_json(Path(out) / "arms" / f"{scale}_{arm}.json", result)
    logging.info("%s %s: %s", scale, arm, summary_row(result))
    return result


def stored_arm(out: Path, scale: str, arm: str, code: str) -> dict | None:
    path = out / "arms" / f"{scale}_{arm}.json"
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    return result if result["definition"] == arm_definition(scale, arm) and result["code"] == code else None


def summary_row(result: dict) -> dict:
    """Start and end of the training triplet accuracy (first / last tenth of the steps) and of the held-out metrics."""
    history = result["history"]
    accuracy_key = next((key for key in history[0] if key.startswith("triplet_accuracy_")), None)
    tenth = max(len(history) // 10, 1)

    def mean(rows, key):
        return sum(row[key] for row in rows) / len(rows)

    row = {"arm": result["definition"]["arm"], "scale": result["definition"]["scale"], "steps": len(history), "commit": result["commit"]}
    row["train_accuracy"] = None if accuracy_key is None else (mean(history[:tenth], accuracy_key), mean(history[-tenth:], accuracy_key))
    last = history[-1]
    for key, _ in SHOWN:
        row[key] = (result["initial_validation"][key], last[key])
    return row


def _pair(values, digits: int = 3) -> str:
    if values is None:
        return "n/a (no triplets)"
    start, end = values
    if start is None or end is None or (isinstance(end, float) and math.isnan(end)):
        return "n/a"
    return f"{start:.{digits}f} -> {end:.{digits}f}"


def summarise(results: list[dict]) -> str:
    """The Markdown table: one row per stored arm, scales in order."""
    order = {name: position for position, name in enumerate(ARMS)}
    rows = sorted((summary_row(result) for result in results), key=lambda row: (row["scale"] != "default", order[row["arm"]]))
    header = "| scale | arm | overrides | steps | training triplet accuracy | " + " | ".join(title for _, title in SHOWN) + " | commit |\n"
    header += "|---|---|---|---:|---|" + "---|" * len(SHOWN) + "---|\n"
    lines = [
        f"| {row['scale']} | {row['arm']} | `{json.dumps(ARMS[row['arm']]) if ARMS[row['arm']] else 'method definition'}` | "
        f"{row['steps']} | {_pair(row['train_accuracy'])} | " + " | ".join(_pair(row[key]) for key, _ in SHOWN) + f" | {row['commit']} |"
        for row in rows
    ]
    return header + "\n".join(lines) + "\n"


def report_markdown(table: str) -> str:
    return (
        "# PA-Triplet: what the loss learns\n\n"
        "Each arm changes its overrides against the method's `same` (every triplet ordered by the descriptor, margin 0.2 "
        "on L2-normalised embeddings, mean over triplets); `each` and FDSL share the table, split, seed and budget. "
        "Training triplet accuracy: fraction of the batch's mined triplets (near-ties included, whether or not the loss "
        "sees them) whose positive is already the nearer in the embedding (mean of the first and of the last tenth of "
        "the steps). "
        "Held-out: agreement of the embedding's ordering with the descriptor's on fixed held-out triplets, and the frozen "
        "trunk's k-NN Recall@1 on the embedded real retrieval set (digits), at initialisation -> at the last step. "
        "`default`: conf/base as it is (10 x 20 fractals at 64 px); `grid`: 20 x 50 at 32 px, 100 steps.\n\n"
        + table
        + "\nReproduce: `python benchmarks/pa_triplet_study.py` (arms already stored with the same code are reused).\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", nargs="+", default=list(SCALES), choices=list(SCALES))
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--jobs", type=int, default=2, help="arms run in parallel, one torch thread each")
    parser.add_argument("--out", default="benchmarks/results/pa_triplet_study", help="the stored arms and their runs")
    parser.add_argument("--report-dir", default="data/08_reporting", help="where the table goes (the report reads it)")
    parser.add_argument("--summarise-only", action="store_true", help="write the table from the stored arms, run nothing")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    for noisy in ("fdsml", "kedro", "pytorch_metric_learning", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    out, code = Path(args.out), code_version()
    wanted = [(scale, arm) for scale in args.scale for arm in args.arms]
    todo = [] if args.summarise_only else [task for task in wanted if stored_arm(out, *task, code) is None]
    logging.info("%d arm(s) to run: %s", len(todo), todo)
    with multiprocessing.get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:
        for _ in pool.imap_unordered(run_arm, [(scale, arm, str(out)) for scale, arm in todo]):
            pass
    stored = [json.loads(path.read_text()) for path in sorted((out / "arms").glob("*.json"))]
    table = summarise(stored)
    report = Path(args.report_dir)
    report.mkdir(parents=True, exist_ok=True)
    (report / "pa_triplet_study.md").write_text(report_markdown(table))
    print(table)


if __name__ == "__main__":
    main()
