"""Is PA-Triplet's ``each`` a label triplet loss on a given codes table? The share of ``each`` triplets
whose descriptor positive is the anchor's classmate, in random P x K class-balanced batches.

    python benchmarks/each_label_agreement.py                       # the default table, 200 batches of 8 x 5
    python benchmarks/each_label_agreement.py --codes PATH --classes 32 --instances 8 --batches 50
    python benchmarks/each_label_agreement.py --env fair            # the table conf/fair generates (not written)

In batch mode ``each`` mines (anchor, classmate, other-class image) and the descriptor decides which of
the two is the positive; ``label_triplet`` always takes the classmate. A share of 1.0 means the two
losses train on the same triplets (docs/pa-triplet.md). Batches are drawn from ``--seed``.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import torch

from fdsml.losses.pa_triplet import allowed_triplets, descriptor_distances, order_by_descriptor


def classmate_share(labels: np.ndarray, psi: np.ndarray, classes: int, instances: int, batches: int, seed: int):
    """(triplets whose positive is the classmate, triplets) over ``batches`` random P x K batches."""
    rng = np.random.default_rng(seed)
    pools = {c: np.flatnonzero(labels == c) for c in np.unique(labels)}
    eligible = [c for c, rows in pools.items() if len(rows) >= instances]
    agree = total = 0
    for _ in range(batches):
        chosen = rng.choice(eligible, classes, replace=False)
        rows = np.concatenate([rng.choice(pools[c], instances, replace=False) for c in chosen])
        batch_labels = torch.from_numpy(labels[rows])
        anchors, classmates, others = allowed_triplets(batch_labels, "each")
        _, positives, _ = order_by_descriptor(descriptor_distances(torch.from_numpy(psi[rows])), anchors, classmates, others)
        agree += int((positives == classmates).sum())
        total += int(anchors.numel())
    return agree, total


def generated_table(env: str) -> pd.DataFrame:
    """The codes table ``kedro run --env <env>`` would generate, generated here (about 20 s for 4,000 rows) without writing it."""
    from fair_comparison import parameters  # the project's loader with its soft env merge (same folder)

    from fdsml.families.generation import generate_table
    from fdsml.data.fractals_config import parse_fractals_params

    table, _ = generate_table(parse_fractals_params(parameters(env)["fractals"]).spec)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", default="data/02_intermediate/fractal_codes.parquet")
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--instances", type=int, default=5)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env", help="generate the table of this configuration environment (conf/<env>) instead of reading --codes")
    args = parser.parse_args()
    table = generated_table(args.env) if args.env else pd.read_parquet(args.codes)
    source = f"conf/{args.env}'s table" if args.env else args.codes
    labels, psi = table["class_id"].to_numpy(), np.stack(table["psi"].to_numpy()).astype(np.float64)
    agree, total = classmate_share(labels, psi, args.classes, args.instances, args.batches, args.seed)
    print(
        f"{source}: {len(table)} rows, {len(np.unique(labels))} classes, {psi.shape[1]}-d psi; "
        f"{args.batches} batches of {args.classes} x {args.instances}: {agree:,} of {total:,} each triplets "
        f"({agree / total:.4f}) have the classmate as the descriptor's positive"
    )


if __name__ == "__main__":
    main()
