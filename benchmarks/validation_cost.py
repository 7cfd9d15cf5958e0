"""Held-out validation's share of the embedded default's pre-training time, cached against uncached (target: at most 10 %).

    python benchmarks/validation_cost.py [--env base]

Pre-trains conf/<env>'s default (conf/base: ``make run``'s job) on a table generated from its
parameters, with its validation, and prints validation's share of the training steps' time (the
figure the pipeline logs; target: at most 10 %). Then, on the trained model, times one validation
as it runs now (held-out renderings and the probe's images cached, embedded in one pass, Recall@1
alone) against one computed the plain way (the probe's images decoded and transformed on every
call through :func:`fdsml.evaluation.frozen_probe.frozen_probe`, held-out and probe embedded in
two passes, every Recall@1 from the full retrieval metrics with their k-means), and prints the
ratio; both give the same metrics (tests/evaluation/test_pretrain_validation.py).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import torch
import yaml

from fdsml.data.holdout import split_table
from fdsml.evaluation.frozen_probe import frozen_probe
from fdsml.evaluation.pretrain_validation import evaluation_mode, probe_splits
from fdsml.evaluation.retrieval import retrieval_metrics
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.pipelines.fractals.nodes import generate_fractal_codes
from fdsml.reporting.history import validation_cost
from fdsml.training.pretrain import build_pretrain_model, build_validation, parse_pretrain_params, pretrain

ROOT = Path(__file__).resolve().parents[1]


def parameters(env: str, key: str) -> dict:
    """``key``'s parameters in conf/base, overridden (one level deep) by conf/``env``'s file where it has one."""
    params = yaml.safe_load((ROOT / "conf/base" / f"parameters_{key}.yml").read_text())[key]
    override = ROOT / "conf" / env / f"parameters_{key}.yml"
    if env != "base" and override.exists():
        for name, value in yaml.safe_load(override.read_text())[key].items():
            params[name] = {**params[name], **value} if isinstance(value, dict) and isinstance(params.get(name), dict) else value
    return params


def uncached(validation, model, config) -> float:
    """Seconds of one validation computed the plain way (its metrics are not needed here: the tests compare them)."""
    started = time.perf_counter()
    with evaluation_mode(model):
        features = torch.cat([model.features(batch) for batch in validation.images.split(validation.settings.batch_size)])
        vectors = features if validation.classifier else model.head(features)
        unseen = (~validation.instance_part).numpy()
        retrieval_metrics(vectors[unseen], validation.class_ids[unseen], ks=(1,), seed=0)
        probe = config.validation.probe
        if probe is not None:
            from fdsml.data import read_retrieval_dataset

            splits = probe_splits(read_retrieval_dataset(probe.dataset, probe.root), probe.max_images, config.train.seed)
            size = probe.image_size or config.model.img_size or 64
            frozen_probe(model, splits, size, crop_fraction=probe.crop_fraction, batch_size=validation.settings.batch_size)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="base", help="conf/<env> over conf/base (base: the embedded default)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    fractals_params, pretrain_params = parameters(args.env, "fractals"), parameters(args.env, "pretrain")
    pretrain_params["run_dir"] = str(Path("/tmp") / f"fdsml-validation-cost-{time.time_ns()}")
    pretrain_params["live_dir"] = None
    table, _ = generate_fractal_codes(fractals_params, None, None)
    fractals = parse_fractals_params(fractals_params)
    config = parse_pretrain_params(pretrain_params)
    split = split_table(table, fractals.holdout, fractals.spec.settings.seed)
    started = time.perf_counter()
    payload, history = pretrain(table, fractals.spec, config, split=split)
    total = time.perf_counter() - started
    share = validation_cost(history)
    steps = float((history["data_s"] + history["step_s"]).sum())
    print(f"pre-training ({args.env}): {int(history['step'].max())} steps, {total:.1f} s in all, {steps:.1f} s in the steps")
    print(f"validation: {int(history['validation_s'].notna().sum())} calls, {history['validation_s'].sum():.2f} s: "
          f"{100 * share:.1f} % of the steps' time (target: at most 10 %)")  # fmt: skip
    validation = build_validation(config, table, fractals.spec, None, split)
    model = build_pretrain_model(config, len(split.training_classes), fractals.spec.size)
    model.load_state_dict(payload["state_dict"])
    cached_s = min(validation(model, 0)["validation_s"] for _ in range(3))
    plain_s = min(uncached(validation, model, config) for _ in range(3))
    print(f"one validation: cached, one pass {cached_s:.2f} s; uncached {plain_s:.2f} s; ratio {plain_s / cached_s:.1f}x "
          f"(uncached share would be about {100 * share * plain_s / cached_s:.1f} %)")  # fmt: skip


if __name__ == "__main__":
    main()
