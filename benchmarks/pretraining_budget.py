"""Does pre-training help, and does it help more with more of it? Recall@1 on Omniglot's test alphabets against the pre-training budget.

    python benchmarks/pretraining_budget.py --jobs 2          # the whole study (see docs/studies.md for its time)
    python benchmarks/pretraining_budget.py --arms each:300   # one arm (scratch is the arm 'scratch:0')
    python benchmarks/pretraining_budget.py --arms fdsl:300 same:300 --pretrain-seeds 0 1 2 --recipes tuned.yml
    python benchmarks/pretraining_budget.py --print-dvc       # the same arms as `dvc exp run --queue` commands
    python benchmarks/pretraining_budget.py --queue           # the same arms queued as DVC experiments

Every arm pre-trains from conf/base with the overrides below: the rendering at conf/cpu's image
size, a ResNet-18, ``budget`` steps of each method (FDSL cross-entropy, PA-Triplet with each filter,
PA-Triplet ``each`` on fresh instances, the fair comparison's objectives and controls) with pre-training seed
``seed``; nothing is tuned per method unless ``--recipes`` names a YAML file of each method's
``pretrain`` overlay (benchmarks/fair_comparison.py writes the tuned ones). Each checkpoint, and
scratch (a random trunk drawn from ``seed``), is then scored twice on Omniglot's test alphabets (``omniglot``; no
setting is chosen on them): (a) the frozen trunk's k-NN Recall@1 / MAP@R
(:mod:`fdsml.evaluation.frozen_probe`), (b) Recall@1 and MAP@R after the standard fine-tuning
recipe (conf/base ``retrieval`` at the same image size, ``--finetune-steps`` steps when the
machine cannot afford its epochs) with 3 seeds.

Each arm is a trial of the Optuna study ``pretraining_budget`` (:mod:`fdsml.tuning.arms`; by default
``data/07_model_output/studies/pretraining_budget.db``, ``--storage`` for a database or journal file that
several machines share), keyed by the digest of its definition (overrides, study settings) and of the code
that computes it: a COMPLETE arm is reused only while both are unchanged, a failed one runs again. The table
and the picture are drawn from the study's complete trials. An arm's run folder (``<out>/runs/<method>_<budget>``:
its checkpoints) is removed once its result is stored: the study's runs otherwise keep several GB.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import NamedTuple
from pathlib import Path

import yaml

from fdsml import experiment_queue
from fdsml.config import with_overlay
from fdsml.tuning.arms import arm_results, open_arms_study, run_arms

DEFAULT_METHODS = ("fdsl", "all", "each", "same", "diff", "fresh_each")
METHOD_OVERRIDES = {
    "fdsl": {"objective": "fdsl"},
    "all": {"objective": "pa_triplet", "pa_triplet": {"filter": "all"}},
    "each": {"objective": "pa_triplet", "pa_triplet": {"filter": "each"}},
    "same": {"objective": "pa_triplet", "pa_triplet": {"filter": "same"}},
    "diff": {"objective": "pa_triplet", "pa_triplet": {"filter": "diff"}},
    "fresh_each": {"objective": "pa_triplet", "pa_triplet": {"filter": "each"}, "data": {"instances": "fresh"}},
    # the fair comparison's parameter-aware objective and controls (docs/studies.md, "Fair comparison protocol"): not in the defaults
    "fdsl_pa": {"objective": "fdsl_pa"},
    "label_triplet": {"objective": "label_triplet"},
    "pml": {"objective": "pml"},
    # the paper's construction: each triplet drawn on its own (conf/fair's pa_explicit arm)
    "explicit_same": {"objective": "pa_triplet", "pa_triplet": {"filter": "same", "mode": "explicit"}},
}
CODE_MODULES = ("fdsml.training.pretrain", "fdsml.training.retrieval", "fdsml.evaluation.frozen_probe", "fdsml.families.generation")


@dataclass(frozen=True)
class Study:
    """What every arm shares: the data, the backbone and the fine-tuning seeds."""

    size: int = 48  # conf/cpu's fractals.render.size (a test holds them equal)
    points: int = 1000  # conf/cpu: 2300
    classes: int = 100
    instances: int = 40
    backbone: str = "resnet18"
    seeds: tuple[int, ...] = (0, 1, 2)
    dataset: str = "omniglot"
    finetune_steps: int | None = None  # None: the recipe's epochs
    finetune_freeze_steps: int | None = None  # None: the recipe's head-only steps
    recipes: dict = field(default_factory=dict)  # method: its pretrain overlay (tuned recipes); none: conf/base's values

    def fractals_overrides(self) -> dict:
        return {"n_classes": self.classes, "instances_per_class": self.instances, "render": {"size": self.size, "points": self.points}}

    def pretrain_overrides(self, method: str, budget: int, seed: int) -> dict:
        recipe = with_overlay(METHOD_OVERRIDES[method], self.recipes.get(method, {}))
        return with_overlay(recipe, {"model": {"backbone": self.backbone}, "train": {"max_steps": budget, "seed": seed}})

    def retrieval_overrides(self) -> dict:
        cut = {"max_steps": self.finetune_steps, "freeze_backbone_steps": self.finetune_freeze_steps}
        train = {key: value for key, value in cut.items() if value is not None}
        return {"data": {"dataset": self.dataset, "image_size": self.size}, "seeds": list(self.seeds)} | ({"train": train} if train else {})


def _dotted(prefix: str, tree: dict) -> list[tuple[str, object]]:
    items = []
    for key, value in tree.items():
        if isinstance(value, dict):
            items += _dotted(f"{prefix}.{key}", value)
        else:
            items.append((f"{prefix}.{key}", value))
    return items


class Arm(NamedTuple):
    """One pre-trained model of the study: a method, its steps, its pre-training seed."""

    method: str
    budget: int
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{self.method}:{self.budget}:{self.seed}"

    @classmethod
    def parse(cls, name: str) -> Arm:
        method, budget, *seed = name.split(":")
        return cls(method, int(budget), int(seed[0]) if seed else 0)


def experiments(study: Study, arms: list[Arm]) -> list[experiment_queue.Experiment]:
    """One DVC experiment per pre-trained arm: the same overrides on conf/base's parameter files.

    Each experiment's retrieval stage fine-tunes scratch and the arm's model; the frozen probe
    is the pre-training validation's ``probe`` columns (and pre-training holds out
    ``fractals.holdout``'s rows, where the direct run trains on every row).
    """
    files = {
        "fractals": "conf/base/parameters_fractals.yml",
        "pretrain": "conf/base/parameters_pretrain.yml",
        "retrieval": "conf/base/parameters_retrieval.yml",
    }
    shared = _dotted("fractals", study.fractals_overrides()) + _dotted("retrieval", study.retrieval_overrides())
    return [
        experiment_queue.Experiment(
            experiment_queue.experiment_name(f"budget-{arm.method}-{arm.budget}-s{arm.seed}"),
            experiment_queue.settings(files, shared + _dotted("pretrain", study.pretrain_overrides(*arm))),
        )
        for arm in arms
        if arm.method != "scratch"
    ]


def code_version() -> str:
    """The digest of the code an arm runs (pre-training, fine-tuning, probe, generator and all they import)."""
    from fdsml import reuse

    return hashlib.sha256("".join(reuse.code_digest(module) for module in CODE_MODULES).encode()).hexdigest()[:16]


def arm_definition(study: Study, arm: Arm) -> dict:
    """What defines an arm's result: the study's settings, its method's recipe alone (not the others'), its steps and seed."""
    shared = {**study.__dict__, "seeds": list(study.seeds), "recipes": study.recipes.get(arm.method, {})}
    return {"study": shared, "method": arm.method, "budget": arm.budget, "seed": arm.seed}


def arm_fingerprints(study: Study, arms: list[Arm]) -> dict[str, str]:
    """Each arm's name and the digest of its definition and code, longest first (parallel workers then end together)."""
    code = code_version()
    return {
        arm.name: hashlib.sha256(json.dumps([arm_definition(study, arm), code], sort_keys=True).encode()).hexdigest()[:16]
        for arm in sorted(arms, key=lambda arm: -arm.budget)
    }


def run_arm(study: Study, out: str, threads: int, name: str) -> tuple[float, dict]:
    """Pre-train one arm (none for scratch), probe it frozen, fine-tune it with every seed; its fine-tuned Recall@1 and result."""
    arm = Arm.parse(name)
    method, budget = arm.method, arm.budget
    import torch

    torch.set_num_threads(threads)
    from kedro.config import OmegaConfigLoader

    from fdsml.evaluation.frozen_probe import frozen_probe
    from fdsml.families.generation import generate_table
    from fdsml.models import build_model, model_from_payload, save_checkpoint
    from fdsml.models.starting_points import StartingPoint
    from fdsml.data.fractals_config import parse_fractals_params
    from fdsml.training.pretrain import parse_pretrain_params, pretrain
    from fdsml.training.retrieval import compare_starting_points, load_splits, parse_retrieval_params

    work = Path(out) / "runs" / f"{method}_{budget}_{arm.seed}"
    params = OmegaConfigLoader("conf", base_env="base", default_run_env="base")["parameters"]
    retrieval = parse_retrieval_params(with_overlay(params["retrieval"], study.retrieval_overrides()) | {"run_dir": str(work / "finetune")})
    started = time.perf_counter()
    if method == "scratch":
        torch.manual_seed(arm.seed)
        model = build_model(study.backbone, img_size=study.size)
        start = StartingPoint("scratch", backbone=study.backbone)
        pretrain_seconds, steps = 0.0, 0
    else:
        spec = parse_fractals_params(with_overlay(params["fractals"], study.fractals_overrides())).spec
        table, _ = generate_table(spec)
        # Every row, no held-out validation: the study's own probe and fine-tuning are its measures.
        overrides = with_overlay(study.pretrain_overrides(*arm), {"validation": {"every": None}})
        config = parse_pretrain_params(with_overlay(params["pretrain"], overrides) | {"run_dir": str(work / "pretrain")})
        payload, history = pretrain(table, spec, config)
        save_checkpoint(work / "model.pt", payload)
        model = model_from_payload(payload)
        start = StartingPoint(method, str(work / "model.pt"), study.backbone)
        pretrain_seconds, steps = time.perf_counter() - started, len(history)
    splits = load_splits(retrieval)
    frozen = frozen_probe(model, splits, study.size, crop_fraction=retrieval.data.crop_fraction)
    finetune_started = time.perf_counter()
    metrics, _, _ = compare_starting_points(replace(retrieval, starts=(start,)))
    result = {
        "definition": arm_definition(study, arm),
        "commit": _git_commit(),
        "pretrain_steps": steps,
        "pretrain_seconds": round(pretrain_seconds, 1),
        "finetune_seconds": round(time.perf_counter() - finetune_started, 1),
        "frozen": frozen,
        "finetuned": metrics[start.name],
    }
    shutil.rmtree(work, ignore_errors=True)  # its checkpoints (about 190 MB a run) are of no use once its result is stored
    logging.info("%s %d seed %d: frozen R@1 %.3f, fine-tuned R@1 %.3f", method, budget, arm.seed, frozen["recall@1"], metrics[start.name]["mean"]["recall@1"])
    return metrics[start.name]["mean"]["recall@1"], result


def _git_commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def _spread(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise_group(results: list[dict]) -> dict:
    """One method at one budget over its pre-training seeds: each metric's mean and its spread over those seeds
    (each seed's fine-tuned value is its mean over the fine-tuning seeds), and fine-tuned Recall@1's over every pair."""
    first = results[0]["definition"]
    row = {"method": first["method"], "budget": first["budget"], "pretrain_seeds": sorted(r["definition"].get("seed", 0) for r in results)}
    for key, values in (
        ("frozen_recall@1", [r["frozen"]["recall@1"] for r in results]),
        ("frozen_map@r", [r["frozen"]["map@r"] for r in results]),
        ("recall@1", [r["finetuned"]["mean"]["recall@1"] for r in results]),
        ("map@r", [r["finetuned"]["mean"]["map@r"] for r in results]),
    ):
        row[key], row[f"{key}_std"] = _spread(values)
    pairs = [seed["recall@1"] for r in results for seed in r["finetuned"]["seeds"].values()]
    row["recall@1_pairs_std"] = _spread(pairs)[1]
    row["finetune_seeds"] = len(results[0]["finetuned"]["seeds"])
    row["pretrain_minutes"] = sum(r["pretrain_seconds"] for r in results) / len(results) / 60
    row["commit"] = ",".join(sorted({r["commit"] for r in results}))
    return row


def summarise(results: list[dict]) -> tuple[str, list[dict]]:
    """The Markdown table (in %: mean ± std over pre-training seeds), one row per method and budget, and its rows."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for result in results:
        groups.setdefault((result["definition"]["method"], result["definition"]["budget"]), []).append(result)
    rows = [summarise_group(groups[key]) for key in sorted(groups, key=lambda key: (key[0] != "scratch", *key))]
    lines = [
        "| method | steps | pre-training seeds | frozen R@1 | frozen MAP@R | fine-tuned R@1 | fine-tuned MAP@R | R@1 std, all pairs | "
        "fine-tuning seeds | pre-training min | commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [f"{100 * row[key]:.1f} ± {100 * row[key + '_std']:.1f}" for key in ("frozen_recall@1", "frozen_map@r", "recall@1", "map@r")]
        lines.append(
            f"| {row['method']} | {row['budget']} | {' '.join(map(str, row['pretrain_seeds']))} | {' | '.join(cells)} | "
            f"{100 * row['recall@1_pairs_std']:.1f} | {row['finetune_seeds']} | {row['pretrain_minutes']:.1f} | {row['commit']} |"
        )
    return "\n".join(lines) + "\n", rows


def report_markdown(study: Study, table: str, recipes_file: str | None = None) -> str:
    """The study as the report shows it: the setup, the table, the picture, how to reproduce it."""
    recipes = f"the recipes of `{recipes_file}` for {', '.join(sorted(study.recipes))}, conf/base's otherwise" if study.recipes else "conf/base recipes otherwise"
    return (
        "# Pre-training budget study\n\n"
        f"FineFractalDB of {study.classes} classes x {study.instances} instances at {study.size} px "
        f"({study.points} points), {study.backbone}, {recipes}. Frozen: k-NN on the "
        f"trunk's pooled features of the {study.dataset} test classes, no fine-tuning. Fine-tuned: the standard "
        f"retrieval recipe (conf/base) at {study.size} px{_steps_note(study)}, fine-tuning seeds {list(study.seeds)}. "
        "In %, mean ± std over the pre-training seeds (each seed's fine-tuned value its mean over the fine-tuning seeds).\n\n"
        + table
        + "\n![Recall@1 against pre-training steps](pretraining_budget.png)\n\n"
        f"Reproduce: `python benchmarks/pretraining_budget.py{_flags(study, recipes_file)}` with the arms of the table "
        "(arms already complete with the same definition and code are reused); `--print-dvc` prints the same arms as DVC experiments.\n"
    )


def _flags(study: Study, recipes_file: str | None) -> str:
    """The command-line flags that give ``study`` (the defaults' flags left out)."""
    flags = {
        "--size": study.size,
        "--points": study.points,
        "--finetune-steps": study.finetune_steps,
        "--finetune-freeze-steps": study.finetune_freeze_steps,
    }
    seeds = "" if study.seeds == Study.seeds else " --seeds " + " ".join(map(str, study.seeds))
    recipes = f" --recipes {recipes_file}" if recipes_file else ""
    return "".join(f" {flag} {value}" for flag, value in flags.items() if value != getattr(Study, flag[2:].replace("-", "_"))) + seeds + recipes


def _steps_note(study: Study) -> str:
    cut = "" if study.finetune_steps is None else f" cut to {study.finetune_steps} steps"
    return cut + ("" if study.finetune_freeze_steps is None else f" ({study.finetune_freeze_steps} of them head-only)")


def draw(rows: list[dict], path: Path, dataset: str) -> None:
    """Recall@1 against pre-training steps per method: fine-tuned (mean ± std over seeds) and frozen; scratch as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (tuned_axis, frozen_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    scratch = [row for row in rows if row["method"] == "scratch"]
    for row in scratch:
        low, high = row["recall@1"] - row["recall@1_std"], row["recall@1"] + row["recall@1_std"]
        tuned_axis.axhspan(100 * low, 100 * high, color="grey", alpha=0.2)
        tuned_axis.axhline(100 * row["recall@1"], color="grey", linestyle="--", label="scratch")
        frozen_axis.axhline(100 * row["frozen_recall@1"], color="grey", linestyle="--", label="scratch (random trunk)")
    for method in sorted({row["method"] for row in rows} - {"scratch"}):
        mine = sorted((row for row in rows if row["method"] == method), key=lambda row: row["budget"])
        steps = [row["budget"] for row in mine]
        tuned_axis.errorbar(steps, [100 * r["recall@1"] for r in mine], yerr=[100 * r["recall@1_std"] for r in mine], marker="o", capsize=3, label=method)
        frozen_axis.errorbar(steps, [100 * r["frozen_recall@1"] for r in mine], yerr=[100 * r["frozen_recall@1_std"] for r in mine], marker="o", capsize=3, label=method)
    for axis, title in ((tuned_axis, f"fine-tuned Recall@1 on {dataset} (± std, pre-training seeds)"), (frozen_axis, f"frozen trunk k-NN Recall@1 on {dataset} (± std)")):
        axis.set_xscale("log")
        axis.set_xlabel("pre-training steps")
        axis.set_ylabel("Recall@1 (%)")
        axis.set_title(title, fontsize=10)
        axis.grid(alpha=0.3)
    tuned_axis.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)


def parse_arms(
    text: list[str] | None, budgets: list[int], methods: list[str], fresh_budgets: list[int], seeds: list[int] = (0,)
) -> list[Arm]:
    """The arms to run: ``method:steps`` (each with every pre-training seed) or ``method:steps:seed`` pairs, or the grid."""
    if text:
        named = [Arm.parse(item) for item in text]
        arms = [arm if item.count(":") == 2 else arm._replace(seed=seed) for item, arm in zip(text, named) for seed in ([0] if item.count(":") == 2 else seeds)]
    else:
        pairs = [("scratch", 0)] + [(method, budget) for method in methods for budget in (fresh_budgets if method == "fresh_each" else budgets)]
        arms = [Arm(method, budget, seed) for method, budget in pairs for seed in seeds]
    unknown = sorted({arm.method for arm in arms} - set(METHOD_OVERRIDES) - {"scratch"})
    if unknown:
        raise SystemExit(f"unknown method(s) {', '.join(unknown)}; choose from scratch, {', '.join(METHOD_OVERRIDES)}")
    return arms


def read_recipes(path: str | None) -> dict:
    """Each method's pretrain overlay from ``path`` (``{method: {optimizer: {base_lr: ...}, ...}}``), or none."""
    if path is None:
        return {}
    recipes = yaml.safe_load(Path(path).read_text()) or {}
    unknown = sorted(set(recipes) - set(METHOD_OVERRIDES)) if isinstance(recipes, dict) else ["(not a mapping)"]
    if unknown or not all(isinstance(recipe, dict) for recipe in recipes.values()):
        raise SystemExit(f"{path}: a mapping of methods ({', '.join(METHOD_OVERRIDES)}) to pretrain overlays is expected; unknown: {', '.join(unknown)}")
    return recipes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[30, 100, 300], help="pre-training steps (about 1x, 3x, 10x)")
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    parser.add_argument("--fresh-budgets", type=int, nargs="+", help="budgets of the fresh-instance arm (default: --budgets)")
    parser.add_argument("--arms", nargs="+", help="method:steps pairs (or method:steps:seed) to run (default: every method x budget, and scratch)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="fine-tuning seeds")
    parser.add_argument("--pretrain-seeds", type=int, nargs="+", default=[0], help="pre-training seeds of every arm (the table's spread)")
    parser.add_argument("--recipes", help="a YAML file of each method's pretrain overlay (benchmarks/fair_comparison.py writes the tuned ones)")
    parser.add_argument("--points", type=int, default=Study.points, help="points per fractal (conf/cpu: 2300)")
    parser.add_argument("--size", type=int, default=Study.size, help="image size of the fractals and of the fine-tuning")
    parser.add_argument("--finetune-steps", type=int, help="cut every fine-tuning to this many steps (default: the recipe's epochs)")
    parser.add_argument("--finetune-freeze-steps", type=int, help="head-only steps of a cut fine-tuning (default: the recipe's)")
    parser.add_argument("--jobs", type=int, default=2, help="arms run in parallel, one torch thread each")
    parser.add_argument("--storage", help="the arms' Optuna storage: a database URL or journal file (default: data/07_model_output/studies/pretraining_budget.db)")
    parser.add_argument("--out", default="benchmarks/results/pretraining_budget", help="the arms' run folders (an arm's is removed once its result is stored)")
    parser.add_argument("--report-dir", default="data/08_reporting", help="where the table and picture go (the report reads them)")
    parser.add_argument("--summarise-only", action="store_true", help="draw the table and picture from the complete arms, run nothing")
    parser.add_argument("--print-dvc", action="store_true", help="print the arms as DVC experiments instead of running them")
    parser.add_argument("--queue", action="store_true", help="queue the arms as DVC experiments (dvc queue start runs them)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    for noisy in ("fdsml", "kedro", "pytorch_metric_learning", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    study = Study(
        size=args.size,
        points=args.points,
        seeds=tuple(args.seeds),
        finetune_steps=args.finetune_steps,
        finetune_freeze_steps=args.finetune_freeze_steps,
        recipes=read_recipes(args.recipes),
    )
    arms = parse_arms(args.arms, args.budgets, args.methods, args.fresh_budgets or args.budgets, args.pretrain_seeds)
    if args.print_dvc or args.queue:
        grid = experiments(study, arms)
        if args.queue:
            experiment_queue.queue(grid, Path(__file__).resolve().parents[1])
        print("\n".join([] if args.queue else experiment_queue.printed(grid, queue=True)))
        print("\n".join(experiment_queue.next_steps(args.jobs)))
        return
    fingerprints = arm_fingerprints(study, arms)
    started = time.perf_counter()
    failed = [] if args.summarise_only else run_arms("pretraining_budget", fingerprints, partial(run_arm, study, args.out, 1), args.jobs, args.storage)
    results = arm_results(open_arms_study("pretraining_budget", args.storage), fingerprints)
    table, rows = summarise(results["result"].tolist())
    report = Path(args.report_dir)
    draw(rows, report / "pretraining_budget.png", study.dataset)
    (report / "pretraining_budget.md").write_text(report_markdown(study, table, args.recipes))
    print(table)
    print(f"{len(results)} of {len(arms)} arm(s) complete, {(time.perf_counter() - started) / 60:.1f} min; {report / 'pretraining_budget.md'}, {report / 'pretraining_budget.png'}")
    if failed:
        raise SystemExit(f"arm(s) {', '.join(failed)} failed (logged above); run the command again to rerun them")


if __name__ == "__main__":
    main()
