"""The fair comparison of the pre-training objectives: every objective tuned with the same budget on the validation alphabet, then measured on the test alphabets.

    python benchmarks/fair_comparison.py tune --arms fdsl pa_same       # each arm's study (the tune pipeline, --env fair)
    python benchmarks/fair_comparison.py summary                        # the studies side by side (validation alphabet)
    python benchmarks/fair_comparison.py seeds --arms fdsl --vary pretrain.fdsl.batches=class_balanced
                                                                        # the best recipe with seeds 0-2 (and a contrast)
    python benchmarks/fair_comparison.py measure --pretrain-seeds 0 1 2 # each arm's best recipe on the test alphabets
    python benchmarks/fair_comparison.py measure --recipes conf/fair/tuned_recipes.yml --steps 5600
                                                                        # the recorded recipes, without tuning again

``tune`` runs, per arm of ``conf/fair/parameters_fair.yml``, ``kedro run --pipelines=tune --env fair``
with the arm's objective and its search space (the shared learning-rate range first) as runtime
parameters: the study ``fair_<arm>``, the same trials, steps, sampler and pruner for every arm
(``conf/fair/parameters_tune.yml``), every choice on ``omniglot_validation``. Invoked again it adds
nothing to a study that has its trials (raise ``tune.budget.n_trials`` in conf/fair to extend every
arm alike). One project folder runs one study at a time (its run lock): several workers take several
checkouts, each its own arms, sharing ``--storage-dir``.

``seeds`` runs each arm's best recipe again with every ``--pretrain-seeds`` seed on the validation
alphabet (the spread the tuning's single seed does not show), and with each ``--vary KEY=VALUE`` in
place of the recipe's value as a contrast: a grid study ``fair_<arm>_seeds`` through the same
pipeline, written to ``<out>/<arm>_seeds.md``. ``summary`` writes ``<out>/tuning.md``: each arm's untuned value (trial 0), its best trial and
recipe, its trials by state and their seconds. ``measure`` writes each arm's recipe (its objective's
overrides and its best trial's values) to ``<out>/recipes.yml`` and runs
``benchmarks/pretraining_budget.py`` on them: pre-training with every ``--pretrain-seeds`` seed on the
whole table, the frozen probe and the fine-tuning on Omniglot's test alphabets, with scratch (a random
trunk per seed) as the reference row; the table in ``<out>``. Workers measuring different arms into one
``--out`` share its arm storage, and the last one's table holds every arm it names. ``measure --recipes
conf/fair/tuned_recipes.yml`` takes the recipes the studies of docs/studies.md chose instead of the
studies, so a fresh clone measures them (at another budget, say) without tuning again. Scratch does
not depend on the budget: measured once in an ``--out``, its row is reused at every budget.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from fdsml.config import with_overlay

ROOT = Path(__file__).resolve().parents[1]
ENV = "fair"


def parameters(env: str) -> dict:
    """The parameters a ``kedro run --env <env>`` reads (the project's loader: the env overrides single keys of base)."""
    from kedro.config import OmegaConfigLoader

    from fdsml.settings import CONFIG_LOADER_ARGS

    return OmegaConfigLoader(str(ROOT / "conf"), **CONFIG_LOADER_ARGS | {"default_run_env": env})["parameters"]


def _storage(storage_dir: str | None) -> dict:
    """``tune.storage_dir`` when the workers share one, else nothing (the env's folder)."""
    return {"storage_dir": storage_dir} if storage_dir else {}


def tune_params(settings: dict, arm: str, storage_dir: str | None) -> dict:
    """The runtime parameters of ``arm``'s study: its name, its objective's overrides, its space."""
    chosen = settings["arms"][arm]
    tune = {"study": f"fair_{arm}", "space": [settings["learning_rate"], *chosen["space"]]}
    return {"tune": tune | _storage(storage_dir), "pretrain": chosen["pretrain"]}


def tune_arm(env: str, arm: str, params: dict, out: Path) -> None:
    """Run ``arm``'s study through the tune pipeline, then keep its page, best overlay, trials and history."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(ROOT)
    with KedroSession.create(project_path=ROOT, env=env, runtime_params=params) as session:
        session.run(pipeline_names=["tune"])
    keep = out / arm
    keep.mkdir(parents=True, exist_ok=True)
    for name in ("tune_study.md", "tune_best_params.yml", "tune_trials.csv", "tune_history.png"):
        shutil.copy2(ROOT / "data/08_reporting" / name, keep / name)


def open_study(all_params: dict, name: str, storage_dir: str | None):
    """The study ``name`` as its storage holds it (every worker's trials)."""
    from fdsml.tuning import load_study, parse_tune_params

    return load_study(parse_tune_params(all_params["tune"] | {"study": name} | _storage(storage_dir)))


def arm_study(all_params: dict, arm: str, storage_dir: str | None):
    """``arm``'s tuning study."""
    return open_study(all_params, f"fair_{arm}", storage_dir)


def recipe(all_params: dict, arm: str, study) -> dict:
    """The arm's pre-training overlay: its objective's overrides with its best trial's values on top.

    Only from a study that has its whole budget: a best trial read while the study runs is not the arm's recipe."""
    from optuna.trial import TrialState

    from fdsml.tuning.outputs import best_overlay, best_trial

    done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    budget = all_params["tune"]["budget"]["n_trials"]
    best = best_trial(study)
    if done < budget or best is None:
        state = f"{done} of its {budget} trials done" if done < budget else "no complete trial"
        raise SystemExit(f"arm {arm}: study {study.study_name} has {state}; run `fair_comparison.py tune --arms {arm}` first")
    return with_overlay({"pretrain": all_params["fair_comparison"]["arms"][arm]["pretrain"]}, best_overlay(study))["pretrain"]


def seeds_params(all_params: dict, arm: str, study, seeds: list[int], vary: dict[str, object], storage_dir: str | None) -> dict:
    """The runtime parameters of ``arm``'s seed study: its recipe, a grid of the seeds and of the two values of each
    varied key the arm searched (the others are not its parameters)."""
    from fdsml.tuning.outputs import best_trial

    best = best_trial(study)
    vary = {key: value for key, value in vary.items() if key in best.params}
    grid = [{"key": "pretrain.train.seed", "choices": list(seeds)}]
    grid += [{"key": key, "choices": [best.params[key], value]} for key, value in vary.items()]
    tune = {"study": f"fair_{arm}_seeds", "space": grid, "sampler": {"name": "grid", "seed": 0}, "pruner": {"name": "none"}}
    tune |= {"baseline": False, "finish_pruned": 0, "budget": {"n_trials": len(seeds) * 2 ** len(vary), "timeout_s": None}}
    return {"tune": tune | _storage(storage_dir), "pretrain": recipe(all_params, arm, study)}


def seeds_table(study) -> str:
    """The seed study in Markdown: each setting's values in seed order, their mean and standard deviation."""
    from fdsml.tuning.outputs import trials_table

    table = trials_table(study)
    table = table[table["state"] == "COMPLETE"].sort_values("pretrain.train.seed")  # the values in seed order
    varied = [column for column in table.columns if column.startswith("pretrain.") and column != "pretrain.train.seed"]
    grouped = table.groupby(varied, dropna=False)["value"] if varied else table.groupby(lambda _: "recipe")["value"]
    rows = grouped.agg(mean="mean", std="std", seeds="count", values=lambda values: " ".join(f"{value:.4f}" for value in values))
    return rows.reset_index().to_markdown(index=False, floatfmt=".4f") + "\n"


def summary_row(arm: str, study) -> dict:
    """One arm's study: its baseline (trial 0), its best trial, its trials by state, their pre-training seconds."""
    from fdsml.tuning.outputs import best_trial, trials_table
    from fdsml.tuning.space import expanded

    table = trials_table(study)
    best = best_trial(study)
    baseline = table[table["number"] == 0]
    counts = table["state"].value_counts()
    searched = {key.split(".", 1)[1]: value for key, value in expanded(best.params).items()} if best else {}
    return {
        "arm": arm,
        "trials": len(table),
        "complete": int(counts.get("COMPLETE", 0)),
        "pruned": int(counts.get("PRUNED", 0)),
        "of them diverged": int(table["diverged"].sum()) if "diverged" in table else 0,
        "baseline R@1": float(baseline["value"].iloc[0]) if len(baseline) and pd.notna(baseline["value"].iloc[0]) else None,
        "best R@1": best.value if best else None,
        "best trial": best.number if best else None,
        "study minutes": float(table["seconds"].sum()) / 60,
        "best recipe": ", ".join(f"{key} {value:.3g}" if isinstance(value, float) else f"{key} {value}" for key, value in searched.items()),
    }


def summary(all_params: dict, arms: list[str], storage_dir: str | None, out: Path) -> pd.DataFrame:
    rows = pd.DataFrame([summary_row(arm, arm_study(all_params, arm, storage_dir)) for arm in arms])
    tune = all_params["tune"]
    head = (
        f"# Fair comparison: the studies on `{tune['validation_dataset']}`\n\n"
        f"Maximising `{tune['metric']}` after {all_params['pretrain']['train']['max_steps']} steps, pre-training seed "
        f"{all_params['pretrain']['train']['seed']}; {tune['budget']['n_trials']} trials an arm (trial 0: the arm at the values "
        f"conf/base had when its study began), sampler {tune['sampler']}, pruner {tune['pruner']}.\n\n"
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "tuning.md").write_text(head + rows.to_markdown(index=False, floatfmt=".3f") + "\n")
    return rows


def recorded_recipes(path: Path, arms: dict[str, str]) -> dict:
    """The recipes of ``arms`` (arm: method) from a recipes file such as conf/fair/tuned_recipes.yml, instead of the studies."""
    from pretraining_budget import read_recipes

    recipes = read_recipes(str(path))
    missing = [f"{arm} (method {method})" for arm, method in arms.items() if method not in recipes]
    if missing:
        raise SystemExit(f"{path} has no recipe for {', '.join(missing)}: add it, or measure without --recipes after `fair_comparison.py tune`")
    return {method: recipes[method] for method in arms.values()}


def measure(all_params: dict, arms: list[str], storage_dir: str | None, out: Path, args: argparse.Namespace) -> None:
    """Write every arm's recipe (its study's best, or ``--recipes``'s), then run the budget study on them with every pre-training seed."""
    settings = all_params["fair_comparison"]["arms"]
    methods = {arm: settings[arm]["method"] for arm in arms}
    if args.recipes:
        recipes = recorded_recipes(Path(args.recipes), methods)
    else:
        recipes = {methods[arm]: recipe(all_params, arm, arm_study(all_params, arm, storage_dir)) for arm in arms}
    out.mkdir(parents=True, exist_ok=True)
    (out / "recipes.yml").write_text(yaml.safe_dump(recipes, sort_keys=True))
    render = all_params["fractals"]["render"]
    steps = args.steps or [all_params["pretrain"]["train"]["max_steps"]]
    command = [
        sys.executable, str(ROOT / "benchmarks/pretraining_budget.py"),
        "--arms", "scratch:0", *[f"{methods[arm]}:{budget}" for arm in arms for budget in steps],
        "--pretrain-seeds", *map(str, args.pretrain_seeds), "--seeds", *map(str, args.finetune_seeds),
        "--recipes", str(out / "recipes.yml"), "--size", str(render["size"]), "--points", str(render["points"]),
        "--jobs", str(args.jobs), "--storage", f"sqlite:///{(out / 'measure.db').resolve()}", "--out", str(out / "runs"), "--report-dir", str(out),
    ]
    if args.finetune_steps:
        command += ["--finetune-steps", str(args.finetune_steps), "--finetune-freeze-steps", str(args.finetune_freeze_steps)]
    subprocess.run(command, cwd=ROOT, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=["tune", "seeds", "summary", "measure"])
    parser.add_argument("--vary", nargs="+", default=[], help="seeds: KEY=VALUE contrasts to the recipe's value (VALUE read as YAML), for the arms that searched KEY")
    parser.add_argument("--arms", nargs="+", help="arms of conf/<env>/parameters_fair.yml (default: every arm)")
    parser.add_argument("--env", default=ENV)
    parser.add_argument("--storage-dir", help="the studies' SQLite folder (default: conf/<env>'s tune.storage_dir), shared by the workers")
    parser.add_argument("--out", default="benchmarks/results/fair_comparison")
    parser.add_argument("--steps", type=int, nargs="+", help="measure: pre-training steps (default: the env's pretrain.train.max_steps)")
    parser.add_argument("--pretrain-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--finetune-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--finetune-steps", type=int, help="measure: cut the fine-tuning to this many steps (default: conf/base's recipe)")
    parser.add_argument("--finetune-freeze-steps", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="measure: arms pre-trained in parallel, one thread each")
    parser.add_argument("--recipes", help="measure: the recipes from this file (e.g. conf/fair/tuned_recipes.yml, the ones the studies chose) instead of the studies")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    all_params = parameters(args.env)
    known = all_params["fair_comparison"]["arms"]
    arms = args.arms or list(known)
    unknown = sorted(set(arms) - set(known))
    if unknown:
        raise SystemExit(f"unknown arm(s) {', '.join(unknown)}; conf/{args.env}/parameters_fair.yml has {', '.join(known)}")
    out = Path(args.out)
    if args.phase == "tune":
        for arm in arms:
            tune_arm(args.env, arm, tune_params(all_params["fair_comparison"], arm, args.storage_dir), out)
    elif args.phase == "seeds":
        vary = {key: yaml.safe_load(value) for key, _, value in (item.partition("=") for item in args.vary)}
        for arm in arms:
            study = arm_study(all_params, arm, args.storage_dir)
            tune_arm(args.env, f"{arm}_seeds", seeds_params(all_params, arm, study, args.pretrain_seeds, vary, args.storage_dir), out)
            (out / f"{arm}_seeds.md").write_text(seeds_table(open_study(all_params, f"fair_{arm}_seeds", args.storage_dir)))
    elif args.phase == "summary":
        print(summary(all_params, arms, args.storage_dir, out).to_markdown(index=False, floatfmt=".3f"))
    else:
        measure(all_params, arms, args.storage_dir, out, args)


if __name__ == "__main__":
    main()
