"""The tuning of several arms side by side (the fair comparison's first phase: one study per arm of ``tune.arms``).

Per arm: its study's trials by state, trial 0's value (the arm at the values conf/base had when its
study began), the best value and the trial that reached it, the minutes its trials took, and the
recipe the best trial found (its searched keys). It reads the studies and runs nothing:

    python -m fdsml.tuning.summary --env fair        # every arm of conf/fair's tune.arms
"""

from __future__ import annotations

import argparse
from typing import Any

import optuna
import pandas as pd

from fdsml.config import env_parameters
from fdsml.tuning.config import parse_tune_params
from fdsml.tuning.outputs import best_trial, trials_table
from fdsml.tuning.space import expanded
from fdsml.tuning.study import load_study

STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING")


def summary_row(arm: str, study: optuna.Study) -> dict[str, Any]:
    """One arm's study: its trials by state (and how many diverged), trial 0's value, the best trial, minutes, recipe."""
    table = trials_table(study)
    best = best_trial(study)
    counts = table["state"].value_counts() if len(table) else pd.Series(dtype=int)
    baseline = table[table["number"] == 0]["value"] if len(table) else pd.Series(dtype=float)
    recipe = expanded(best.params) if best else {}
    return {
        "arm": arm,
        "trials": len(table),
        **{state.lower(): int(counts.get(state, 0)) for state in STATES},
        "diverged": int(table["diverged"].sum()) if len(table) else 0,
        "trial 0": float(baseline.iloc[0]) if len(baseline) and pd.notna(baseline.iloc[0]) else None,
        "best": best.value if best else None,
        "best trial": best.number if best else None,
        "minutes": float(table["seconds"].sum()) / 60 if len(table) else 0.0,
        "recipe": ", ".join(f"{key} {value:.3g}" if isinstance(value, float) else f"{key} {value}" for key, value in recipe.items()),
    }


def tuning_summary(tune: dict[str, Any]) -> str:
    """Every arm of ``params:tune``'s arms side by side in Markdown, each study named as ``tune.arm=<arm>`` names it
    (an arm not tuned yet is a row of zeros)."""
    config = parse_tune_params(tune | {"arm": None})
    rows = [summary_row(arm, load_study(parse_tune_params(tune | {"arm": arm}))) for arm in config.arms]
    head = f"Maximising `{config.metric}`; {config.budget.n_trials} trials an arm (trial 0: the arm at conf/base's values).\n\n"
    return head + pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3f") + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="fair", help="the configuration environment whose tune.arms are summarised")
    parser.add_argument("--conf-source", default="conf")
    args = parser.parse_args(argv)
    print(tuning_summary(env_parameters(args.conf_source, args.env)["tune"]))


if __name__ == "__main__":
    main()
