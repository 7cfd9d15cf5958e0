"""The one input normalisation's effect on Omniglot: the frozen probe and fine-tuned retrieval, before and after.

    OMP_NUM_THREADS=1 python benchmarks/normalisation_effect.py                    # both arms, seeds 0 1 2
    python benchmarks/normalisation_effect.py --arms before --seeds 0              # one arm, one seed
    python benchmarks/normalisation_effect.py --arms scratch                       # the reference: no pre-training
    python benchmarks/normalisation_effect.py --finetune-steps 100                 # a cut fine-tuning
    python benchmarks/normalisation_effect.py --summarise-only                     # the table of the complete runs

Each arm runs `make run`'s pre-training (conf/base, through the pipeline's own nodes: the
fractals pipeline's table, ``pretrain_model``), then (1) the frozen trunk's k-NN metrics on all
2,120 images of Omniglot's test alphabets, at initialisation and at the end, and (2) conf/base's
retrieval fine-tuning on Omniglot from the pre-trained trunk (``finetune_starting_points``).
Seed ``s`` drives the whole chain: pre-training seed ``s`` and fine-tuning seed ``s``, the same in
both arms. Only the normalisation differs between the arms:

* ``after`` is the code as it is: one normalisation (ImageNet's mean and std,
  :mod:`fdsml.models.normalisation`) recorded in the model file and applied by the model itself,
  in pre-training, in the probe and in fine-tuning.
* ``before`` emulates the code before commit 6299cb1 (d911ef6), which cannot read Omniglot and whose
  model files record no normalisation, so it is not run itself. That code fed pre-training
  grey level / 255 unnormalised, and the probe and fine-tuning ImageNet-normalised images into the
  same trunk. Here pre-training records mean 0 and std 1 (``pretrain.model.overrides``), so the
  trunk sees exactly pixels / 255; the probe and fine-tuning then read the same weights through a
  copy of the model file whose recorded normalisation is ImageNet's, so the trunk sees exactly
  ``(pixels / 255 - ImageNet mean) / ImageNet std``: the old mismatch, and nothing else changed.

``scratch`` (``--arms before after scratch``) adds the reference: the same fine-tuning from a random
trunk, no pre-training, which feeds ImageNet-normalised images to a random trunk before and after alike.

Every run checks that this is what happened: a global forward hook reads every batch the model's
normalisation layer receives and hands to the trunk, per phase, and the run fails unless the
inputs are in [0, 1] and the trunk got them normalised with the arm's values for that phase
(``before``: mean 0 / std 1 in pre-training, ImageNet's in the probe and fine-tuning; ``after``:
ImageNet's throughout). The table prints what the trunk saw.

Each (arm, seed) run is a trial of the Optuna study ``normalisation_effect`` (:mod:`fdsml.tuning.arms`; by
default ``data/07_model_output/studies/normalisation_effect.db``, ``--storage`` for a database or journal
file), keyed by the digest of its definition: a COMPLETE run is reused while its definition is unchanged, a
failed one runs again. The table goes to ``<out>/normalisation_effect.md``. A run's work folder
(``<out>/work/<arm>_seed<seed>``: its checkpoints, about 190 MB) is deleted once its result is stored.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import shutil
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from fdsml.config import with_overlay
from fdsml.tuning.arms import arm_results, open_arms_study, run_arms

ARMS = ("before", "after", "scratch")
METRICS = ("recall@1", "recall@2", "recall@4", "recall@8", "map@r", "r_precision")
CHECK_TOLERANCE = 1e-5


@dataclass(frozen=True)
class Arm:
    """The normalisation pre-training records and the one the probe and fine-tuning apply (None: the recorded one)."""

    name: str
    pretrain: tuple[tuple[float, ...], tuple[float, ...]] | None  # None: no pre-training (scratch)
    consumers: tuple[tuple[float, ...], tuple[float, ...]] | None


def arm(name: str) -> Arm:
    from fdsml.models.normalisation import IMAGENET_MEAN, IMAGENET_STD, INPUT_MEAN, INPUT_STD

    if name == "before":
        return Arm(name, ((0.0,), (1.0,)), (IMAGENET_MEAN, IMAGENET_STD))
    if name == "after":
        return Arm(name, (INPUT_MEAN, INPUT_STD), None)
    if name == "scratch":  # the reference: a random trunk fed ImageNet-normalised images, before and after alike
        return Arm(name, None, (INPUT_MEAN, INPUT_STD))
    raise SystemExit(f"unknown arm {name!r}; choose from {', '.join(ARMS)}")


def work_folder(out: Path, name: str, seed: int) -> Path:
    """Where a run's pre-training and fine-tuning write their run folders (checkpoints)."""
    return out / "work" / f"{name}_seed{seed}"


def pretrain_params(base: dict, chosen: Arm, seed: int, work: Path) -> dict:
    """conf/base's ``pretrain`` with the arm's recorded normalisation and the seed; the built-in probe off (this script probes)."""
    mean, std = chosen.pretrain
    overrides = {
        "model": {"overrides": {"input_mean": list(mean), "input_std": list(std)}},
        "train": {"seed": seed},
        "validation": {"probe": None},
        "run_dir": str(work / "pretrain"),
        "live_dir": None,
    }
    return with_overlay(base, overrides)


def retrieval_params(
    base: dict, name: str, seed: int, work: Path, steps: int | None, freeze_steps: int | None, checkpoint: str | None = "pretrained_model"
) -> dict:
    """conf/base's ``retrieval`` fine-tuning the given model file (None: a random trunk) alone, with one seed."""
    cut = {key: value for key, value in (("max_steps", steps), ("freeze_backbone_steps", freeze_steps)) if value is not None}
    start = {"name": name, "checkpoint": checkpoint, "backbone": base["starts"][-1]["backbone"]}
    return with_overlay(base, {"starts": [start], "seeds": [seed], "train": cut, "run_dir": str(work / "finetune"), "live_dir": None})


def consumer_payload(payload: dict, chosen: Arm) -> dict:
    """The model file as the arm's probe and fine-tuning see it: the same weights, the consumers' normalisation."""
    if chosen.consumers is None:
        return payload
    mean, std = chosen.consumers
    return payload | {"model": payload["model"] | {"input_mean": list(mean), "input_std": list(std)}}


class TrunkInputs:
    """Per phase, what the model's normalisation layer received and handed to the trunk (a global forward hook)."""

    def __init__(self):
        self.phases: dict[str, dict] = {}

    @contextmanager
    def phase(self, name: str, normalisation: tuple[tuple[float, ...], tuple[float, ...]]):
        import torch

        from fdsml.models.normalisation import Normalise, channel_values

        stats = self.phases.setdefault(
            name, {"batches": 0, "input_min": math.inf, "input_max": -math.inf, "input_mean": 0.0, "trunk_mean": 0.0, "trunk_min": math.inf, "max_error": 0.0}
        )

        def hook(module, inputs, output):
            if not isinstance(module, Normalise):
                return
            x, y = inputs[0].detach().float(), output.detach().float()
            mean, std = (torch.tensor(channel_values(v, x.shape[1], key)).view(1, -1, 1, 1) for key, v in zip(("mean", "std"), normalisation))
            n = stats["batches"]
            stats.update(
                batches=n + 1,
                input_min=min(stats["input_min"], x.min().item()),
                input_max=max(stats["input_max"], x.max().item()),
                input_mean=(n * stats["input_mean"] + x.mean().item()) / (n + 1),
                trunk_mean=(n * stats["trunk_mean"] + y.mean().item()) / (n + 1),
                trunk_min=min(stats["trunk_min"], y.min().item()),
                max_error=max(stats["max_error"], (y - (x - mean) / std).abs().max().item()),
            )

        handle = torch.nn.modules.module.register_module_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()

    def check(self) -> None:
        """Fail unless every phase saw batches in [0, 1], normalised as the arm says."""
        for name, stats in self.phases.items():
            if stats["batches"] == 0 or stats["input_min"] < 0 or stats["input_max"] > 1 or stats["max_error"] > CHECK_TOLERANCE:
                raise AssertionError(f"{name}: the trunk's inputs are not what the arm emulates: {stats}")


def initial_payload(table, fractals_params: dict, params: dict) -> dict:
    """The model file of the pre-training model at initialisation, built as ``pretrain`` builds it (same seed, same split)."""
    import torch

    from fdsml.data.holdout import split_table
    from fdsml.models import model_payload
    from fdsml.data.fractals_config import parse_fractals_params
    from fdsml.training.pretrain import build_pretrain_model, parse_pretrain_params

    fractals, config = parse_fractals_params(fractals_params), parse_pretrain_params(params)
    split = split_table(table, fractals.holdout, fractals.spec.settings.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.train.seed)
        return model_payload(build_pretrain_model(config, len(split.training_classes), fractals.spec.size))


def run_chain(chosen: Arm, seed: int, out: Path, steps: int | None, freeze_steps: int | None) -> dict:
    """Pre-train with the arm's normalisation, probe the trunk at initialisation and at the end, fine-tune; the result."""
    from kedro.config import OmegaConfigLoader

    from fdsml.evaluation.frozen_probe import frozen_probe
    from fdsml.models import model_from_payload
    from fdsml.pipelines.fractals.nodes import generate_fractal_codes, materialize_renderings
    from fdsml.pipelines.pretrain.nodes import pretrain_model
    from fdsml.pipelines.retrieval.nodes import finetune_starting_points
    from fdsml.training.retrieval import load_splits, parse_retrieval_params

    work = work_folder(out, chosen.name, seed)
    conf = OmegaConfigLoader("conf", base_env="base", default_run_env="base")["parameters"]
    pretraining = pretrain_params(conf["pretrain"], chosen, seed, work)
    retrieval = retrieval_params(conf["retrieval"], chosen.name, seed, work, steps, freeze_steps)
    parsed = parse_retrieval_params(retrieval)
    data, splits = parsed.data, load_splits(parsed)
    consumers = chosen.consumers or chosen.pretrain
    seen, timings, probes = TrunkInputs(), {}, {}

    table, summary = generate_fractal_codes(conf["fractals"], None, None)
    images = materialize_renderings(table, conf["fractals"], summary)
    started = time.perf_counter()
    with seen.phase("pre-training", chosen.pretrain):
        payload, history = pretrain_model(table, images, conf["fractals"], pretraining, summary)
    timings["pretrain_s"] = time.perf_counter() - started
    started = time.perf_counter()
    with seen.phase("probe", consumers):
        for when, model_file in (("initialisation", initial_payload(table, conf["fractals"], pretraining)), ("end", payload)):
            model = model_from_payload(consumer_payload(model_file, chosen))
            probes[when] = frozen_probe(model, splits, data.image_size, crop_fraction=data.crop_fraction)
    timings["probe_s"] = time.perf_counter() - started
    started = time.perf_counter()
    with seen.phase("fine-tuning", consumers):
        metrics, _, _ = finetune_starting_points(consumer_payload(payload, chosen), retrieval)
    timings["finetune_s"] = time.perf_counter() - started
    seen.check()
    heldout = history["val_unseen_class_recall_at_1"].dropna()
    return {
        "definition": definition(chosen, seed, steps, freeze_steps),
        "pretrain_steps": int(payload["metadata"]["steps"]),
        "recorded_normalisation": {key: payload["model"][key] for key in ("input_mean", "input_std")},
        "trunk_inputs": seen.phases,
        "probe": probes,
        "heldout_fractal_recall@1": float(heldout.iloc[-1]) if len(heldout) else None,
        "finetuned": metrics[chosen.name]["seeds"][str(seed)],
        "seconds": {key: round(value, 1) for key, value in timings.items()},
    }


def run_scratch(chosen: Arm, seed: int, out: Path, steps: int | None, freeze_steps: int | None) -> dict:
    """The same fine-tuning from a random trunk (no pre-training, so the same computation before and after): the reference."""
    from kedro.config import OmegaConfigLoader

    from fdsml.pipelines.retrieval.nodes import finetune_starting_points

    conf = OmegaConfigLoader("conf", base_env="base", default_run_env="base")["parameters"]
    work = work_folder(out, chosen.name, seed)
    retrieval = retrieval_params(conf["retrieval"], chosen.name, seed, work, steps, freeze_steps, checkpoint=None)
    seen = TrunkInputs()
    started = time.perf_counter()
    with seen.phase("fine-tuning", chosen.consumers):
        metrics, _, _ = finetune_starting_points(None, retrieval)
    seconds = time.perf_counter() - started
    seen.check()
    return {
        "definition": definition(chosen, seed, steps, freeze_steps),
        "trunk_inputs": seen.phases,
        "finetuned": metrics[chosen.name]["seeds"][str(seed)],
        "seconds": {"finetune_s": round(seconds, 1)},
    }


def definition(chosen: Arm, seed: int, steps: int | None, freeze_steps: int | None) -> dict:
    return {"arm": chosen.name, "pretrain": chosen.pretrain, "consumers": chosen.consumers, "seed": seed, "finetune_steps": steps, "finetune_freeze_steps": freeze_steps}


def run_fingerprints(names: list[str], seeds: list[int], steps: int | None, freeze_steps: int | None) -> dict[str, str]:
    """Each run's name (``<arm>_seed<seed>``) and the digest of its definition."""
    return {
        f"{name}_seed{seed}": hashlib.sha256(json.dumps(definition(arm(name), seed, steps, freeze_steps), sort_keys=True).encode()).hexdigest()[:16]
        for name in names
        for seed in seeds
    }


def run_one(out: Path, steps: int | None, freeze_steps: int | None, run_name: str) -> tuple[float, dict]:
    """One (arm, seed) run, its work folder deleted after; its fine-tuned Recall@1 and its result."""
    name, seed = run_name.rsplit("_seed", 1)[0], int(run_name.rsplit("_seed", 1)[1])
    chosen, started = arm(name), time.perf_counter()
    result = json.loads(json.dumps((run_scratch if chosen.pretrain is None else run_chain)(chosen, seed, out, steps, freeze_steps)))
    shutil.rmtree(work_folder(out, name, seed))
    logging.info("%s seed %d: %.1f min", name, seed, (time.perf_counter() - started) / 60)
    return result["finetuned"]["recall@1"], result


def _write(path: Path, text: str) -> None:
    from fdsml.atomic import atomic_path

    with atomic_path(path) as temporary:
        temporary.write_text(text)


def _cell(values: list[float]) -> str:
    if not values:
        return ""
    mean = 100 * statistics.fmean(values)
    return f"{mean:.1f}" if len(values) == 1 else f"{mean:.1f} ± {100 * statistics.stdev(values):.1f}"


def _value(result: dict, *keys: str) -> float | None:
    """``result[keys[0]][keys[1]]...``, or None where a run has no such measure (scratch has no probe)."""
    for key in keys:
        result = result.get(key) if isinstance(result, dict) else None
    return result


def summarise(results: list[dict]) -> str:
    """The Markdown table: one row per measure, one column per arm that ran (mean ± std over seeds, in %), and
    after - before seed by seed over the seeds both ran."""
    by_arm = {name: [r for r in results if r["definition"]["arm"] == name] for name in ARMS}
    arms = [name for name in ARMS if by_arm[name]]
    seeds = {name: {r["definition"]["seed"]: r for r in by_arm[name]} for name in ("before", "after")}
    paired = sorted(seeds["before"].keys() & seeds["after"].keys())
    rows = [(f"frozen probe {m}, initialisation", ("probe", "initialisation", m)) for m in ("recall@1", "map@r")]
    rows += [(f"frozen probe {m}, end of pre-training", ("probe", "end", m)) for m in METRICS]
    rows += [("held-out fractal classes recall@1, end", ("heldout_fractal_recall@1",))]
    rows += [(f"fine-tuned {m}", ("finetuned", m)) for m in (*METRICS, "nmi")]
    columns = arms + (["after - before, same seed"] if paired else [])
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    seed_lists = [" ".join(str(r["definition"]["seed"]) for r in by_arm[name]) for name in arms]
    lines.append("| seeds | " + " | ".join(seed_lists + ([" ".join(map(str, paired))] if paired else [])) + " |")
    for label, keys in rows:
        cells = [_cell([v for v in (_value(r, *keys) for r in by_arm[name]) if v is not None]) for name in arms]
        if paired:
            pairs = [(_value(seeds["after"][seed], *keys), _value(seeds["before"][seed], *keys)) for seed in paired]
            cells.append(_cell([after - before for after, before in pairs if after is not None and before is not None]))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for result in results:
        seen = "; ".join(
            f"{phase}: input mean {s['input_mean']:.3f} in [{s['input_min']:.2f}, {s['input_max']:.2f}], trunk input mean {s['trunk_mean']:.3f} (min {s['trunk_min']:.2f})"
            for phase, s in result["trunk_inputs"].items()
        )
        seconds = ", ".join(f"{key[:-2]} {value / 60:.1f} min" for key, value in result["seconds"].items())
        lines.append(f"* {result['definition']['arm']} seed {result['definition']['seed']}: {seen}. Time: {seconds}.")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=["before", "after"], choices=ARMS, help="scratch: the fine-tuning from a random trunk, for reference")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of pre-training and fine-tuning, the same in both arms")
    parser.add_argument("--finetune-steps", type=int, help="cut every fine-tuning to this many steps (default: the recipe's epochs)")
    parser.add_argument("--finetune-freeze-steps", type=int, help="head-only steps of a cut fine-tuning (default: the recipe's)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/normalisation_effect"), help="the runs' work folders, the table")
    parser.add_argument("--storage", help="the runs' Optuna storage: a database URL or journal file (default: data/07_model_output/studies/normalisation_effect.db)")
    parser.add_argument("--summarise-only", action="store_true", help="print the table of the complete runs, run nothing")
    args = parser.parse_args(argv)
    for flag in ("finetune_steps", "finetune_freeze_steps"):
        if getattr(args, flag) is not None and getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')}: must be 0 or more")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("kedro", "pytorch_metric_learning", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    cut = (args.finetune_steps, args.finetune_freeze_steps)
    wanted = run_fingerprints(args.arms, args.seeds, *cut)
    failed = [] if args.summarise_only else run_arms("normalisation_effect", wanted, partial(run_one, args.out, *cut), storage=args.storage)
    every = run_fingerprints(sorted(ARMS), args.seeds, *cut)  # the table: every arm complete with these seeds and this fine-tuning
    table = summarise(arm_results(open_arms_study("normalisation_effect", args.storage), every)["result"].tolist())
    _write(args.out / "normalisation_effect.md", table)
    print(table)
    if failed:
        raise SystemExit(f"run(s) {', '.join(failed)} failed (logged above); run the command again to rerun them")


if __name__ == "__main__":
    main()
