"""The method's main claim on conf/base's retrieval dataset (Omniglot): scratch vs FDSL vs FDSML (same, each).

    python benchmarks/retrieval_comparison.py --seeds 0 1 2 --classes 20 --instances 50

Generates a FineFractalDB, pre-trains three checkpoints on it with the default recipe (FDSL
cross-entropy, PA-Triplet `same`, PA-Triplet `each`), fine-tunes every starting point with the
same retrieval recipe for each seed, and prints the comparison table (mean ± std over seeds).
Everything comes from conf/base with the overrides below; nothing here is tuned per method.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from kedro.config import OmegaConfigLoader

from fdsml.families.generation import generate_table
from fdsml.models import save_checkpoint
from fdsml.models.starting_points import StartingPoint
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.training.pretrain import parse_pretrain_params, pretrain
from fdsml.training.retrieval import compare_starting_points, comparison_table, parse_retrieval_params

VARIANTS = {
    "fdsl": {"objective": "fdsl"},
    "fdsml_same": {"objective": "pa_triplet", "pa_triplet": {"filter": "same"}},
    "fdsml_each": {"objective": "pa_triplet", "pa_triplet": {"filter": "each"}},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--classes", type=int, default=20)
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--pretrain-epochs", type=int, default=6)
    parser.add_argument("--finetune-epochs", type=int, default=6)
    parser.add_argument("--out", default="benchmarks/results/retrieval_comparison.json")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 avoids oversubscription on shared cores)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    params = OmegaConfigLoader("conf", base_env="base", default_run_env="base")["parameters"]
    spec = parse_fractals_params(params["fractals"] | {"n_classes": args.classes, "instances_per_class": args.instances}).spec
    started = time.perf_counter()
    table, _ = generate_table(spec)
    work = Path(tempfile.mkdtemp(prefix="fdsml-retrieval-"))
    starts = [StartingPoint("scratch")]
    for name, override in VARIANTS.items():
        pretrain_params = params["pretrain"] | override | {"run_dir": str(work / name)}
        config = parse_pretrain_params(pretrain_params)
        config = replace(config, train=replace(config.train, epochs=args.pretrain_epochs))
        payload, _ = pretrain(table, spec, config)
        save_checkpoint(work / f"{name}.pt", payload)
        starts.append(StartingPoint(name, str(work / f"{name}.pt")))
    pretrain_seconds = time.perf_counter() - started

    retrieval = parse_retrieval_params(params["retrieval"] | {"run_dir": str(work / "finetune")})
    retrieval = replace(
        retrieval, starts=tuple(starts), seeds=tuple(args.seeds), train=replace(retrieval.train, epochs=args.finetune_epochs)
    )
    metrics, _, _ = compare_starting_points(retrieval)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(metrics, indent=2))
    print(comparison_table(metrics))
    print(f"pre-training {pretrain_seconds:.0f} s, total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
