"""Fashion-MNIST top-1 from scratch and from a pre-trained checkpoint, with the project's classification recipe.

    python benchmarks/fashion_mnist.py --checkpoint data/06_models/pretrained_model.pt [--epochs 3] [--max-steps N]

Both starting points get conf/base's classification recipe unchanged (ResNet-18, 32 px, AdamW, warm-up
cosine, label smoothing), on Debian's dataset-fashion-mnist (60,000 training, 10,000 test images), and
are scored once on the test split. ``--max-steps`` cuts both runs to the same number of steps where the
machine allows no more. Prints the table, the wall time per start, and writes them as JSON. For
reference, the dataset's README lists (unverified by its authors) ResNet-18 94.9 %, a two-layer
convolutional network 91.6 %.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import torch
from kedro.config import OmegaConfigLoader

from fdsml.atomic import atomic_path
from fdsml.models import load_checkpoint_file
from fdsml.training.classification import metrics_table, parse_classification_params, run_classification


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="data/06_models/pretrained_model.pt", help="the pre-trained model file")
    parser.add_argument("--epochs", type=int, default=None, help="null: conf/base's classification.train.epochs")
    parser.add_argument("--max-steps", type=int, default=None, help="stop both runs after this many steps")
    parser.add_argument("--root", default=None, help="Fashion-MNIST's folder (default: Debian's)")
    parser.add_argument("--out", default="benchmarks/results/fashion_mnist.json")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 avoids oversubscription on shared cores)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    params = OmegaConfigLoader("conf", base_env="base", default_run_env="base")["parameters"]["classification"]
    train = params["train"] | {k: v for k, v in (("epochs", args.epochs), ("max_steps", args.max_steps)) if v is not None}
    params = params | {
        "datasets": [{"name": "fashion_mnist", "root": args.root}],
        "train": train,
        "run_dir": tempfile.mkdtemp(prefix="fdsml-fashion-"),
    }
    results = {}
    for start in params["starting_points"]:
        started = time.perf_counter()
        config = parse_classification_params(params | {"starting_points": [start]})
        _, metrics, _ = run_classification(config, load_checkpoint_file(args.checkpoint))
        results[start["name"]] = metrics["fashion_mnist"][start["name"]] | {"seconds": time.perf_counter() - started}
    table = metrics_table({"fashion_mnist": results})
    print(table)
    for name, scores in results.items():
        print(f"{name}: {scores['steps']} steps in {scores['seconds'] / 60:.1f} min")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as temporary:
        Path(temporary).write_text(json.dumps({"checkpoint": args.checkpoint, "train": train, "results": results}, indent=2))


if __name__ == "__main__":
    main()
