"""The steps a study's arm runs, one after another, on its parameters: each adds metrics to the arm's result.

A step reads the sections of the arm's parameters it names in :data:`STEPS` and the state the
steps before it left (the pre-trained model file), and returns its metrics, named ``<prefix>.<name>``.
``pretrain`` trains on every row of the fractals table (the study's own probe and fine-tuning are its
measures); ``pretrain_heldout`` holds ``fractals.holdout``'s rows out and reports the validation's
values at initialisation and at the last step. Without a pre-training step the trunk is a random
one drawn from ``pretrain.train.seed``, so scratch has a spread over the seeds like every other arm.
The pre-training runs of every arm share one ``pretrain.run_dir``: a run's folder is named by its
fingerprint, so two arms (or seeds of fine-tuning) that differ only downstream of pre-training find
the same finished run there and train nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

Metrics = dict[str, float]
RETRIEVAL_METRICS = ("recall@1", "recall@2", "recall@4", "recall@8", "map@r", "r_precision", "nmi")


@dataclass(frozen=True)
class Step:
    """A step: what it runs, the parameter sections it reads (its fingerprint), the metrics it may yield."""

    run: Callable[[dict[str, Any], dict[str, Any]], Metrics]
    sections: tuple[str, ...]
    metrics: tuple[str, ...]


def _fractals(params: dict[str, Any]):
    from fdsml.data.fractals_config import parse_fractals_params
    from fdsml.families.generation import generate_table

    fractals = parse_fractals_params(params["fractals"])
    table, _ = generate_table(fractals.spec)
    return fractals, table


def _pretrain(params: dict[str, Any], state: dict[str, Any], *, heldout: bool) -> Metrics:
    from fdsml.data.holdout import split_table
    from fdsml.training.pretrain import parse_pretrain_params, pretrain

    fractals, table = _fractals(params)
    split = split_table(table, fractals.holdout, fractals.spec.settings.seed) if heldout else None
    started = time.perf_counter()
    state["payload"], history = pretrain(table, fractals.spec, parse_pretrain_params(params["pretrain"]), split=split)
    metrics = {"pretrain.steps": float(len(history)), "pretrain.seconds": time.perf_counter() - started}
    if heldout:
        initial, last = history.iloc[0], history.iloc[-1]
        for key in (key for key in history.columns if key.startswith("val_")):
            metrics[f"initial.{key}"], metrics[f"last.{key}"] = float(initial[key]), float(last[key])
    return metrics


def pretrain_every_row(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """Pre-train on every row of the fractals table (no held-out rows)."""
    return _pretrain(params, state, heldout=False)


def pretrain_heldout(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """Pre-train with ``fractals.holdout``'s rows held out; the validation's values at step 0 and at the last step."""
    return _pretrain(params, state, heldout=True)


def _trunk(params: dict[str, Any], state: dict[str, Any]):
    """The pre-trained model, or (no pre-training step) a random trunk drawn from ``pretrain.train.seed``."""
    import torch

    from fdsml.models import build_model, model_from_payload

    if "payload" in state:
        return model_from_payload(state["payload"])
    torch.manual_seed(params["pretrain"]["train"]["seed"])
    return build_model(params["pretrain"]["model"]["backbone"], img_size=params["retrieval"]["data"]["image_size"])


def frozen_probe(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """The frozen trunk's k-NN retrieval metrics on ``retrieval.data.dataset``'s test classes."""
    from fdsml.evaluation.frozen_probe import frozen_probe as probe
    from fdsml.training.retrieval import load_splits, parse_retrieval_params

    retrieval = parse_retrieval_params(params["retrieval"])
    found = probe(_trunk(params, state), load_splits(retrieval), retrieval.data.image_size, crop_fraction=retrieval.data.crop_fraction)
    return {f"frozen.{key}": float(value) for key, value in found.items()}


def finetune(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """Fine-tune the pre-trained model (or scratch) with ``retrieval``'s recipe and seeds; the metrics' means over the seeds."""
    from fdsml.models.starting_points import PRETRAINED, StartingPoint
    from fdsml.training.retrieval import compare_starting_points, parse_retrieval_params

    retrieval = parse_retrieval_params(params["retrieval"])
    backbone = params["pretrain"]["model"]["backbone"]
    start = StartingPoint("pretrained", PRETRAINED, backbone) if "payload" in state else StartingPoint("scratch", backbone=backbone)
    started = time.perf_counter()
    metrics, _, _ = compare_starting_points(replace(retrieval, starts=(start,)), pretrained=state.get("payload"))
    found = {f"finetuned.{key}": float(value) for key, value in metrics[start.name]["mean"].items()}
    return found | {"finetune.seconds": time.perf_counter() - started}


STEPS: dict[str, Step] = {
    "pretrain": Step(pretrain_every_row, ("fractals", "pretrain"), ("pretrain.steps", "pretrain.seconds")),
    "pretrain_heldout": Step(
        pretrain_heldout,
        ("fractals", "pretrain"),
        ("pretrain.steps", "pretrain.seconds")
        + tuple(f"{when}.val_{name}" for when in ("initial", "last") for name in (
            "unseen_agreement_same", "unseen_agreement_each", "unseen_agreement_all", "probe_recall_at_1", "probe_map_at_r"
        )),
    ),
    "frozen_probe": Step(frozen_probe, ("pretrain", "retrieval"), tuple(f"frozen.{name}" for name in RETRIEVAL_METRICS)),
    "finetune": Step(
        finetune, ("pretrain", "retrieval"), tuple(f"finetuned.{name}" for name in RETRIEVAL_METRICS) + ("finetune.seconds",)
    ),
}
"""Every step a study file may name: what it runs, reads and yields."""
