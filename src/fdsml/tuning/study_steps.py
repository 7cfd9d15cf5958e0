"""The steps a study's arm runs, one after another, on its parameters: each adds metrics to the arm's result.

A step reads the sections of the arm's parameters it names in :data:`STEPS` and the state the
steps before it left (the pre-trained model file), and returns its metrics, named ``<prefix>.<name>``.
``pretrain`` trains on every row of the fractals table (the study's own probe and fine-tuning are its
measures); ``pretrain_heldout`` holds ``fractals.holdout``'s rows out and reports the validation's
values at initialisation and at the last step. Without a pre-training step the trunk is a random
one drawn from ``pretrain.train.seed``, so scratch has a spread over the seeds like every other arm.
The pre-training runs of every study share one ``pretrain.run_dir``: a run's folder is named by its
fingerprint, so two arms (or seeds of fine-tuning, or studies) that differ only downstream of
pre-training find the same finished run there and train nothing; a lock makes two units running at once
with the same pre-training train it once. ``descriptor`` validates the descriptor on the fractals table
and ``sweeps`` runs its sweeps alone (a second factor range, as a named step of the study file) on the table
``descriptor`` left in the state. A step records its stages' CPU seconds on the runner's
:class:`fdsml.timers.CpuSeconds` (``state["cpu"]``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fdsml.descriptor_validation.agreement import SAME_POSITION_GROUPS
from fdsml.evaluation.pretrain_validation import METRICS as VALIDATION_COLUMNS
from fdsml.losses.candidates import FILTERS

Metrics = dict[str, float]
RETRIEVAL_METRICS = ("recall@1", "recall@2", "recall@4", "recall@8", "map@r", "r_precision", "nmi")
ACCEPTANCE_RATES = ("class_filter_acceptance_rate", "class_acceptance_rate", "instance_acceptance_rate")
SWEEP_FIGURES = (
    "contractive_fraction",
    "monotone_fraction_contractive",
    "monotone_within_noise_fraction_contractive",
    "median_spearman_contractive",
    "monotone_fraction_noncontractive",
    "median_spearman_noncontractive",
    "median_spearman_pooled",
    "noise_floor_px_median",
)
SWEEP_COUNTS = ("n_sweeps", "n_empty", "n_empty_renderings")
SWEEP_METRICS = tuple(f"sweeps.{key}" for key in (*SWEEP_FIGURES, *SWEEP_COUNTS, "lowest_factor", "highest_factor"))
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    """A step: what it runs, the parameter sections it reads (its fingerprint), the metrics it may yield, and the stages
    whose CPU seconds it records (the runner yields them as ``cpu_seconds.<step>.<stage>``, the whole step's as
    ``cpu_seconds.<step>``)."""

    run: Callable[[dict[str, Any], dict[str, Any]], Metrics]
    sections: tuple[str, ...]
    metrics: tuple[str, ...]
    stages: tuple[str, ...] = ()


def _fractals(params: dict[str, Any], *, with_summary: bool = False):
    """``params:fractals`` parsed, and its table (with the generation summary when asked)."""
    from fdsml.data.fractals_config import parse_fractals_params
    from fdsml.families.generation import generate_table

    fractals = parse_fractals_params(params["fractals"])
    table, summary = generate_table(fractals.spec)
    return fractals, ((table, summary) if with_summary else table)


def _pretrain(params: dict[str, Any], state: dict[str, Any], *, heldout: bool) -> Metrics:
    from fdsml.data.holdout import split_table
    from fdsml.training.pretrain import parse_pretrain_params, pretrain

    fractals, table = _fractals(params)
    split = split_table(table, fractals.holdout, fractals.spec.settings.seed) if heldout else None
    config = parse_pretrain_params(params["pretrain"])
    started = time.perf_counter()
    with _only_trainer(config.run_dir, {"fractals": params["fractals"], "pretrain": params["pretrain"], "heldout": heldout}):
        state["payload"], history = pretrain(table, fractals.spec, config, split=split)
    metrics = {"pretrain.steps": float(len(history)), "pretrain.seconds": time.perf_counter() - started}
    return metrics | (_validation_ends(history) if heldout else {})


@contextmanager
def _only_trainer(run_dir: str, definition: dict[str, Any]):
    """Hold an exclusive lock named by ``definition`` under ``run_dir`` while its pre-training runs, so that two
    units running at once with one pre-training (two fine-tuning seeds) train it once: the second waits, then finds
    the finished run in its fingerprint's folder. The kernel drops the lock however the holder ends."""
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(json.dumps(definition, sort_keys=True, default=str).encode()).hexdigest()[:16]
    with open(folder / f".{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _validation_ends(history) -> Metrics:
    """The held-out validation at initialisation (the history's step 0) and at the last step; the training triplet
    accuracy (``triplet_accuracy_<filter>``, where the objective mines triplets) over the first and the last tenth of the steps."""
    metrics = {}
    for key in VALIDATION_COLUMNS:
        if key in history:
            metrics[f"initial.{key}"], metrics[f"last.{key}"] = float(history[key].iloc[0]), float(history[key].iloc[-1])
    steps = history.iloc[1:]
    tenth = max(len(steps) // 10, 1)
    for key in (key for key in steps.columns if key.startswith("triplet_accuracy_")):
        metrics["train.triplet_accuracy_first_tenth"] = float(steps[key].iloc[:tenth].mean())
        metrics["train.triplet_accuracy_last_tenth"] = float(steps[key].iloc[-tenth:].mean())
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


def _start(params: dict[str, Any], state: dict[str, Any]):
    """The start fine-tuning begins from and its model file: the pre-trained model, or scratch's random trunk of
    ``pretrain.train.seed`` (the fine-tuning seed then draws only the head and the order), so that scratch's
    units differ by both seeds as every other arm's do rather than repeating one run per pre-training seed."""
    from fdsml.models import model_payload
    from fdsml.models.starting_points import PRETRAINED, StartingPoint

    name = "pretrained" if "payload" in state else "scratch"
    payload = state["payload"] if "payload" in state else model_payload(_trunk(params, state))
    return StartingPoint(name, PRETRAINED, params["pretrain"]["model"]["backbone"]), payload


def frozen_probe(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """The frozen trunk's k-NN retrieval metrics on ``retrieval.data.dataset``'s test classes."""
    from fdsml.evaluation.frozen_probe import frozen_probe as probe
    from fdsml.training.retrieval import load_splits, parse_retrieval_params

    retrieval = parse_retrieval_params(params["retrieval"])
    found = probe(_trunk(params, state), load_splits(retrieval), retrieval.data.image_size, crop_fraction=retrieval.data.crop_fraction)
    return {f"frozen.{key}": float(value) for key, value in found.items()}


def pixels(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """The raw-pixel baseline: k-NN on the test view's pixels of ``retrieval.data.dataset``'s test classes (shrunk to at
    most ``retrieval.baselines.pixel_size`` a side), scored as the trunks are; no training, no seed."""
    from fdsml.training.retrieval import load_splits, parse_retrieval_params
    from fdsml.training.retrieval_comparison import pixel_scores

    retrieval = parse_retrieval_params(params["retrieval"])
    found, _ = pixel_scores(retrieval, load_splits(retrieval))
    return {f"pixels.{key}": float(value) for key, value in found.items()}


def finetune(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """Fine-tune the pre-trained model (or scratch) with ``retrieval``'s recipe and seeds; the metrics' means over the seeds."""
    from fdsml.training.retrieval import compare_starting_points, parse_retrieval_params

    retrieval = parse_retrieval_params(params["retrieval"])
    start, payload = _start(params, state)
    started = time.perf_counter()
    metrics, _, _ = compare_starting_points(replace(retrieval, starts=(start,)), pretrained=payload)
    found = {f"finetuned.{key}": float(value) for key, value in metrics[start.name]["mean"].items()}
    return found | {"finetune.seconds": time.perf_counter() - started}


def classify(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """Fine-tune the pre-trained model (or scratch) as a classifier with ``classification``'s recipe on its first
    dataset; top-1 and top-5 on its test split."""
    from fdsml.training.classification import parse_classification_params, run_classification

    config = parse_classification_params(params["classification"])
    start, payload = _start(params, state)
    started = time.perf_counter()
    _, metrics, _ = run_classification(replace(config, datasets=config.datasets[:1], starting_points=(start,)), payload)
    scores = metrics[config.datasets[0].name][start.name]
    return {"classified.top1": float(scores["top1"]), "classified.top5": float(scores["top5"]), "classify.seconds": time.perf_counter() - started}


def _stages(state: dict[str, Any]):
    """The CPU seconds of this step's stages (:class:`fdsml.timers.CpuSeconds`): the runner's for the step, else a new one."""
    from fdsml.timers import CpuSeconds

    return state.setdefault("cpu", CpuSeconds())


def _descriptor_table(params: dict[str, Any], state: dict[str, Any]):
    """The fractals table (its spec and generation summary) and the rows the validation draws from; a step before this
    one that generated the table from the same ``params:fractals`` left it in ``state``, so it is generated once."""
    from fdsml.descriptor_validation.measure import parse_validate_descriptor_params, validated_rows

    with _stages(state).stage("generation"):
        made = state.get("fractals_table")
        if made is None or made[0] != params["fractals"]:
            made = state["fractals_table"] = (params["fractals"], *_fractals(params, with_summary=True))
        _, fractals, (table, summary) = made
        config = parse_validate_descriptor_params(params["validate_descriptor"])
        return fractals, summary, config, validated_rows(table, params["fractals"], config)


def _sweep_metrics(table, fractals, config, state: dict[str, Any]) -> Metrics:
    """The sweeps over ``validate_descriptor.sweep.factor_range``: their figures and counts, and the smallest and
    largest factor they ran (``sweeps.lowest_factor``, ``sweeps.highest_factor``)."""
    from fdsml.descriptor_validation.measure import sweep_points
    from fdsml.descriptor_validation.sweeps import summarise_sweeps

    with _stages(state).stage("sweeps"):
        points = sweep_points(table, fractals.spec, config)
    with _stages(state).stage("statistics"):
        sweeps = summarise_sweeps(points)
    found = {f"sweeps.{key}": float(sweeps[key]) for key in SWEEP_FIGURES + SWEEP_COUNTS if sweeps.get(key) is not None}
    return found | {"sweeps.lowest_factor": float(points["factor"].min()), "sweeps.highest_factor": float(points["factor"].max())}


def descriptor(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """Generate the fractals table and validate its descriptor (``validate_descriptor``): the generator's acceptance
    rates, the triplet agreement per filter, the label rule's, and the sweeps' figures. A table the generator cannot
    complete is a result too (``generation.failed`` 1, no other figure). The ``same`` filter's agreement is also split
    by the positions its codes were perturbed at (``same_by_position.<group>``, with its count of triplets,
    ``same_by_position.<group>.trials``: a proportion's own trials for the table's intervals). Its stages' CPU seconds:
    generation, triplets, sweeps, statistics."""
    from fdsml.errors import GenerationError
    from fdsml.descriptor_validation.agreement import summarise_agreement
    from fdsml.descriptor_validation.measure import triplet_agreement

    try:
        fractals, summary, config, table = _descriptor_table(params, state)
    except GenerationError as error:
        logger.warning("the generator could not complete the table: %s", error)
        return {"generation.failed": 1.0}
    with _stages(state).stage("triplets"):
        triplets = triplet_agreement(table, fractals.spec, config)
    with _stages(state).stage("statistics"):
        agreement = summarise_agreement(triplets)
    metrics = {"generation.failed": 0.0} | {f"generation.{key}": float(summary[key]) for key in ACCEPTANCE_RATES}
    for block in ("agreement", "label_rule_agreement", "same_positive_rate"):
        metrics |= {f"{block}.{name}": float(value) for name, value in agreement[block].items() if value is not None}
    for group, found in agreement.get("same_by_position", {}).items():
        if found["fraction"] is not None:
            metrics |= {f"same_by_position.{group}": float(found["fraction"]), f"same_by_position.{group}.trials": float(found["n"])}
    return metrics | _sweep_metrics(table, fractals, config, state)


def sweeps(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """The descriptor validation's sweeps alone (``validate_descriptor.sweep``) on the fractals table: a study runs them
    over a second factor range as a named step (``named_steps``) beside ``descriptor``, on the table it generated.
    A table the generator cannot complete yields ``generation.failed`` 1 and no other figure."""
    from fdsml.errors import GenerationError

    try:
        fractals, _, config, table = _descriptor_table(params, state)
    except GenerationError as error:
        logger.warning("the generator could not complete the table: %s", error)
        return {"generation.failed": 1.0}
    return {"generation.failed": 0.0} | _sweep_metrics(table, fractals, config, state)


GPU_CHECK = Path("benchmarks/gpu_check.py")
GPU_CHECK_STATUSES = ("ok", "skipped", "not run", "FAIL", "TIMEOUT")


def gpu_check(params: dict[str, Any], state: dict[str, Any]) -> Metrics:
    """Run ``benchmarks/gpu_check.py`` (every row on a CUDA machine; ``--quick``, its CPU rows at tiny sizes, without
    one) from the project folder; its rows counted by status. A failed row fails the step, so a study that runs it
    first (``first`` of the study file) spends no GPU-hour on a machine that cannot run the project."""
    import subprocess
    import sys
    import tempfile

    import torch

    if not GPU_CHECK.is_file():
        raise FileNotFoundError(f"{GPU_CHECK} is not under {Path.cwd()}: run the study from the project folder")
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "gpu_check.txt"
        mode = [] if torch.cuda.is_available() else ["--quick"]
        done = subprocess.run([sys.executable, str(GPU_CHECK), *mode, "--table", str(table)], capture_output=True, text=True)
        text = table.read_text() if table.is_file() else ""
    logger.info("benchmarks/gpu_check.py %s:\n%s", " ".join(mode) or "(every row)", text or done.stdout[-2000:] + done.stderr[-2000:])
    counts = _status_counts(text)
    if done.returncode != 0 or not text:
        raise RuntimeError(f"benchmarks/gpu_check.py failed (exit {done.returncode}): {counts.get('FAIL', 0):.0f} row(s) FAIL, "
                           f"{counts.get('TIMEOUT', 0):.0f} TIMEOUT; its table is in the log above")
    return {f"gpu_check.{status.replace(' ', '_').lower()}": counts.get(status, 0.0) for status in GPU_CHECK_STATUSES}


def _status_counts(table: str) -> dict[str, float]:
    """Rows of a gpu_check table by status (the column under its header's ``status``)."""
    lines = table.splitlines()
    header = next((index for index, line in enumerate(lines) if line.startswith("check") and "status" in line), None)
    if header is None:
        return {}
    start = lines[header].index("status")
    counts: dict[str, float] = {}
    for line in lines[header + 1 :]:
        status = line[start : start + 12].strip()
        counts[status] = counts.get(status, 0.0) + 1
    return counts


STEPS: dict[str, Step] = {
    "pretrain": Step(pretrain_every_row, ("fractals", "pretrain"), ("pretrain.steps", "pretrain.seconds")),
    "pretrain_heldout": Step(
        pretrain_heldout,
        ("fractals", "pretrain"),
        ("pretrain.steps", "pretrain.seconds", "train.triplet_accuracy_first_tenth", "train.triplet_accuracy_last_tenth")
        + tuple(f"{when}.{column}" for when in ("initial", "last") for column in VALIDATION_COLUMNS),
    ),
    "descriptor": Step(
        descriptor,
        ("fractals", "validate_descriptor"),
        ("generation.failed", *(f"generation.{key}" for key in ACCEPTANCE_RATES))
        + tuple(f"{block}.{name}" for block in ("agreement", "label_rule_agreement", "same_positive_rate") for name in FILTERS)
        + tuple(f"same_by_position.{group}{trials}" for group in SAME_POSITION_GROUPS for trials in ("", ".trials"))
        + SWEEP_METRICS,
        ("generation", "triplets", "sweeps", "statistics"),
    ),
    "sweeps": Step(sweeps, ("fractals", "validate_descriptor"), ("generation.failed", *SWEEP_METRICS), ("generation", "sweeps", "statistics")),
    "classify": Step(classify, ("pretrain", "classification"), ("classified.top1", "classified.top5", "classify.seconds")),
    "frozen_probe": Step(frozen_probe, ("pretrain", "retrieval"), tuple(f"frozen.{name}" for name in RETRIEVAL_METRICS)),
    "pixels": Step(pixels, ("retrieval",), tuple(f"pixels.{name}" for name in RETRIEVAL_METRICS)),
    "finetune": Step(
        finetune, ("pretrain", "retrieval"), tuple(f"finetuned.{name}" for name in RETRIEVAL_METRICS) + ("finetune.seconds",)
    ),
    "gpu_check": Step(gpu_check, (), tuple(f"gpu_check.{status.replace(' ', '_').lower()}" for status in GPU_CHECK_STATUSES)),
}
"""Every step a study file may name: what it runs, reads and yields."""
