"""SIGKILL the pipelines at seeded random moments, run them again to the end, compare with an uninterrupted run.

Runs in its own process (``python -m tests.faults.kill_harness``): it imports Kedro, torch and the
project once, then forks one child per run, so a kill costs milliseconds of start-up instead of a
fresh interpreter. Two scratch projects share the code: ``reference`` runs every pipeline once,
``faulted`` runs each pipeline, is killed ``kills`` times at uniform moments within the reference's
duration, and then runs to the end. After every kill, every visible file under ``data/`` must load
whole; at the end, every output must equal the reference's (byte for byte, or field for field
where a file records wall time). Prints one JSON report, with the seconds it took. ``tests/faults/test_kills.py``
runs it at ``--scale 1``; a longer soak is ``python -m tests.faults.kill_harness /tmp/soak --scale 5 --seed 1``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd

from fdsml.integrity import RECORD_SUFFIX, file_digest, recorded_digests
from tests.support import NO_HOLDOUT, make_project, tiny_fractals, tiny_pretrain

PIPELINES = ("fractals", "validate_descriptor", "pretrain", "retrieval", "classification", "robustness", "analysis", "report")
KILLS = {"fractals": 6, "pretrain": 4, "retrieval": 2, "classification": 2, "robustness": 2, "report": 4}
"""Kills per pipeline (20 in all), weighted towards the short runs to keep the suite's time small."""
RUN_STATE = re.compile(r"_runs?$")  # training run folders: resume state, not outputs
WALL_TIME = re.compile(r"(^|_)(s|seconds|time|elapsed|images_per_s)$")

TINY = {
    "fractals": tiny_fractals(instances=4, class_filter=(64, 3000), holdout=NO_HOLDOUT, outputs={"materialize": True, "shard_size": 4}),
    "pretrain": tiny_pretrain(3, {"data.source": "shards"}),
    "validate_descriptor": {
        "n_triplets": 6,
        "n_base_codes": 1,
        "grid_triplets_per_filter": 1,
        "sweep": {"n_factors": 5, "n_noise_seeds": 1, "compare_fresh_seeds": False},
    },
    "retrieval": {
        "data": {"image_size": 16, "batch_size": 16, "eval_batch_size": 512},
        "embedding": {"embedding_dim": 8},
        "train": {"max_steps": 3, "checkpoint_every": 1, "freeze_backbone_steps": 1, "device": "cpu"},
        "n_example_queries": 2,
    },
    "classification": {"image_size": 32, "batch_size": 16, "eval_batch_size": 512, "train": {"max_steps": 3, "checkpoint_every": 1, "device": "cpu"}},
    "robustness": {"max_images": 4, "severities": [1, 5], "device": "cpu"},
    "analysis": {
        "device": "cpu",
        "embedding_map": {"n_classes": 3, "max_instances_per_class": 4, "sweep_points": 3, "thumbnails": 2, "n_neighbors": 3},
        "trajectory": {"n_alphas": 4, "thumbnails": 2, "projection": "pca"},
        "real_images": {"n_images": 8},
        "gradcam": {"n_show": 2},
        "grids": {"n_classes": 2, "n_instances": 2, "triplets_per_filter": 1},
    },
}


def run_pipeline(project: Path, pipeline: str) -> None:
    """The body of a child: what ``kedro run --pipelines=NAME`` does, in ``project``."""
    from kedro.framework.session import KedroSession

    os.chdir(project)
    with KedroSession.create(project_path=project) as session:
        session.run(pipeline_names=[pipeline])


def fork_run(project: Path, pipeline: str, kill_after: float | None = None) -> tuple[int, float]:
    """Run ``pipeline`` in a forked child, SIGKILLed after ``kill_after`` seconds; (exit status, seconds)."""
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            log = open(project / f"{pipeline}.log", "a")
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            run_pipeline(project, pipeline)
            code = 0
        finally:
            os._exit(code)
    done, status = 0, 0
    if kill_after is not None:
        deadline = started + kill_after
        while not done and time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            time.sleep(0.005)
        if not done:
            os.kill(pid, signal.SIGKILL)
    if not done:
        _, status = os.waitpid(pid, 0)
    return status, time.monotonic() - started


def visible_files(project: Path) -> list[Path]:
    """Files under ``data/`` a reader would take for outputs (temporaries are hidden dot-files)."""
    return sorted(p for p in (project / "data").rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(project).parts))


def load_whole(path: Path):
    """Read ``path`` completely as its type; raises when the file is truncated or garbled."""
    suffix = path.suffix
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix == ".csv":
        return pd.read_csv(path)
    if suffix == ".json":
        return json.loads(path.read_text())
    if suffix == ".png":
        from PIL import Image

        with Image.open(path) as image:
            return np.asarray(image.convert("RGBA"))
    if suffix == ".npy":
        return np.load(path)
    if suffix == ".pt":
        from fdsml.models import load_checkpoint_file

        return load_checkpoint_file(path)
    return path.read_text()


def comparable(path: Path):
    """The content of an output minus what records wall time; of a file's content record, whether it vouches for the
    file alone (the bytes it records carry the file's wall times)."""
    if path.suffix == RECORD_SUFFIX:
        recorded = path.with_suffix("")
        return recorded_digests(recorded) == {file_digest(recorded)}
    if path.suffix == ".tsv" and WALL_TIME.search(path.stem):  # a live plot of a wall-time metric: its steps only
        return pd.read_csv(path, sep="\t")[["step"]]
    value = load_whole(path)
    if isinstance(value, pd.DataFrame):
        return value.drop(columns=[c for c in value.columns if WALL_TIME.search(str(c))])
    if path.suffix in (".json", ".pt"):
        return _without_wall_time(value)
    if isinstance(value, str):
        return re.sub(r"\d+(\.\d+)? (s|images/s)\b", "<wall time>", value)
    return value


def _without_wall_time(value):
    if isinstance(value, dict):
        return {k: _without_wall_time(v) for k, v in value.items() if not WALL_TIME.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [_without_wall_time(v) for v in value]
    if hasattr(value, "numpy"):
        return value.numpy()
    return value


def outputs(project: Path) -> set[str]:
    return {str(p.relative_to(project)) for p in visible_files(project) if not any(RUN_STATE.search(part) for part in p.parts)}


def differences(reference: Path, faulted: Path) -> list[str]:
    """Outputs that differ (or exist on one side only) between the two projects."""
    wanted, found = outputs(reference), outputs(faulted)
    problems = [f"{name}: only in the {side} run" for side, names in (("reference", wanted - found), ("faulted", found - wanted)) for name in sorted(names)]
    for name in sorted(wanted & found):
        a, b = reference / name, faulted / name
        if a.read_bytes() != b.read_bytes() and not _equal(comparable(a), comparable(b)):
            problems.append(f"{name}: differs from the uninterrupted run")
    return problems


def _equal(a, b) -> bool:
    if isinstance(a, pd.DataFrame):
        return isinstance(b, pd.DataFrame) and a.equals(b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def broken_files(project: Path) -> list[str]:
    broken = []
    for path in visible_files(project):
        try:
            load_whole(path)
        except Exception as error:  # any failure to read it whole is a partial file
            broken.append(f"{path.relative_to(project)}: {type(error).__name__}: {error}")
    return broken


def leftovers(project: Path) -> list[str]:
    return [str(p.relative_to(project)) for p in (project / "data").rglob(".*.tmp-*")]


def soak(workdir: Path, scale: int = 1, seed: int = 0) -> dict:
    """Every pipeline: reference run, ``scale`` x KILLS kills of the faulted run, run to the end, compare."""
    from kedro.framework.project import find_pipelines
    from kedro.framework.startup import bootstrap_project

    reference, faulted = make_project(workdir / "reference", TINY), make_project(workdir / "faulted", TINY)
    import fdsml  # noqa: F401  (the repository's package, whichever src bootstrap_project adds)

    bootstrap_project(reference)
    find_pipelines()  # imports every pipeline (torch, timm, ...) once, before any fork
    import torch

    torch.set_num_threads(1)  # tiny models on shared cores
    rng = np.random.default_rng(seed)
    report = {"seed": seed, "pipelines": {}, "kills": 0, "killed_mid_run": 0, "broken": [], "differences": [], "leftovers": []}
    for pipeline in PIPELINES:
        before = outputs(reference)
        status, seconds = fork_run(reference, pipeline)
        if status != 0:
            raise RuntimeError(f"the uninterrupted {pipeline} run failed (status {status}); see {reference / pipeline}.log")
        if pipeline not in KILLS:  # not under test: its outputs are the reference's
            for name in outputs(reference) - before:
                (faulted / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(reference / name, faulted / name)
            continue
        entry = {"reference_s": round(seconds, 2), "kills": []}
        for _ in range(KILLS[pipeline] * scale):
            delay = float(rng.uniform(0.05, 0.95) * seconds)
            status, _ = fork_run(faulted, pipeline, kill_after=delay)
            killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            entry["kills"].append({"after_s": round(delay, 2), "killed_mid_run": killed})
            report["broken"] += broken_files(faulted)
        status, _ = fork_run(faulted, pipeline)
        if status != 0:
            report["differences"].append(f"{pipeline}: the run after the kills failed (status {status})")
        report["pipelines"][pipeline] = entry
        report["kills"] += len(entry["kills"])
        report["killed_mid_run"] += sum(k["killed_mid_run"] for k in entry["kills"])
    report["differences"] += differences(reference, faulted)
    report["leftovers"] = leftovers(faulted)
    report["outputs_compared"] = len(outputs(reference))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--scale", type=int, default=1, help="multiplies the kills per pipeline (KILLS)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    report = soak(args.workdir, args.scale, args.seed)
    print(json.dumps(report | {"seconds": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main()
