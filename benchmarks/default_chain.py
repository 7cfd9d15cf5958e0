"""The embedded default end to end, as a new user runs it: `dvc repro` in a fresh copy, stage by stage, against its budget of 10 minutes on 2 idle cores.

    python benchmarks/default_chain.py [--keep FOLDER] [--stages fractals,pretrain,...] [--json]

Copies every file git tracks (or would track) into a scratch folder (no data, no DVC cache, no
run cache: nothing can be restored instead of computed), then runs ``dvc repro --single-item
<stage>`` for each stage of dvc.yaml in its data-flow order, timing each (Kedro's start and
DVC's bookkeeping included), and prints each stage's seconds and share of the total, with the
machine's load average before and after (the times are upper bounds when other jobs share the
cores; each stage's CPU seconds, printed beside, say less about the load). The copy's own ``src``
comes first on PYTHONPATH, so the code measured is the copy's. The target (README, docs/cpu.md):
every stage together within 10 minutes on 2 idle cores.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from tests.support import copy_tracked  # noqa: E402  (every file git tracks or would track, as on disk)
from timing import parser  # noqa: E402


def environment(folder: Path) -> dict[str, str]:
    """The user's environment with this interpreter's tools first and the copy's code ahead of any installed one."""
    return os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(folder / "src"),
                         "KEDRO_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "DVC_NO_ANALYTICS": "1"}  # fmt: skip


def stage_names(folder: Path) -> list[str]:
    """dvc.yaml's stages in the order written (data-flow order)."""
    return list(yaml.safe_load((folder / "dvc.yaml").read_text())["stages"])


def prepare(folder: Path) -> None:
    """A git repository of the copy, so DVC works in it as in a clone."""
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "copy"]):
        subprocess.run(command, cwd=folder, check=True, capture_output=True)


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_stage(stage: str, folder: Path, log: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of ``dvc repro --single-item stage`` in ``folder``; its output goes to ``log``; a failure stops the run."""
    cpu, started = children_cpu(), time.perf_counter()
    with log.open("w") as out:
        repro = ["dvc", "repro", "--single-item", stage]
        code = subprocess.run(repro, cwd=folder, env=environment(folder), stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - started
    if code:
        sys.exit(f"stage {stage} failed (exit {code}) after {seconds:.0f} s: see {log}")
    return seconds, children_cpu() - cpu


def main() -> None:
    command = parser(__doc__, "--json")
    command.add_argument("--keep", type=Path, help="run in this (empty or new) folder and keep it")
    command.add_argument("--stages", help="comma-separated stages to time (default: all, in order)")
    args = command.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fdsml-chain-"))
    folder.mkdir(parents=True, exist_ok=True)
    copy_tracked(folder)
    prepare(folder)
    stages = args.stages.split(",") if args.stages else stage_names(folder)
    load_before = os.getloadavg()
    times = {stage: time_stage(stage, folder, folder / f"chain-{stage}.log") for stage in stages}
    load_after = os.getloadavg()
    total, total_cpu = (sum(part[i] for part in times.values()) for i in (0, 1))
    if args.json:
        print(json.dumps({"seconds": times, "total_s": total, "cpu_s": total_cpu, "load_before": load_before, "load_after": load_after}))
    else:
        for stage, (seconds, cpu) in times.items():
            print(f"{stage:20s} {seconds:7.1f} s {100 * seconds / total:5.1f} %   ({cpu:7.1f} CPU s)")
        print(f"{'total':20s} {total:7.1f} s ({total / 60:.1f} min; target 10 min on 2 idle cores)   ({total_cpu:7.1f} CPU s)")
        print(f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f}")
    if args.keep is None:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
