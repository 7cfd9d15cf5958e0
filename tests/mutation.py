"""Mutation testing of the modules that decide the numbers (docs/mutation.md): mutmut 3, one unit at a time.

``python -m tests.mutation [UNIT ...]`` (``make mutation [UNIT=seeds]``) runs each unit of :data:`UNITS` (all of
them without arguments) in a scratch copy of the repository under ``.mutation/<unit>/``: mutmut mutates the
unit's modules there and runs, for each mutant, only the tests of the unit's test paths that reach the mutated
function (mutmut's per-function coverage, collected once per unit by running those paths). Each run starts the
unit afresh: mutmut's own reuse of earlier results missed tests added since, and kept their mutants "survived".
Each unit prints one line: mutants, killed, survived, untested, its score and its minutes;
``.mutation/<unit>/survivors.txt`` lists the survivors (``mutmut show NAME`` in that folder shows one).

``python -m tests.mutation --survivors UNIT ...`` (``make mutation-survivors UNIT=seeds``) reruns only the survivors
and the untested mutants of a unit's last run, against the tests as they are now (copied into its folder and mapped
again to the functions they reach): the way to check tests written for survivors without a whole run.
Its line counts the whole unit again, with their new verdicts.

``python -m tests.mutation --sample N --seed S UNIT`` (``make mutation-sample UNIT=training SAMPLE=320``) runs a seeded
uniform sample of N of the unit's mutants against the tests as they are, one mutmut per CPU over disjoint source files,
and estimates the whole unit's score with a 95 % interval: the way to measure a unit too slow to run whole.

Not in CI: a unit takes minutes to hours on 2 cores. Run it at low priority (the Makefile's ``nice -n 15``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from scipy.stats import binomtest

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".mutation"
COPIED = ("src", "tests", "conf", "docs", "README.md", "dvc.yaml", "params.yaml", "Makefile", "pyproject.toml")
NOT_COPIED = shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc")  # bytecode and Numba's caches, rebuilt there

UNITS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # unit: (modules to mutate, as mutmut's only_mutate globs; the test paths whose tests may kill them)
    "seeds": (("src/fdsml/seeds.py",), ("tests/test_seeds.py", "tests/data/test_random_streams.py")),
    "fingerprints": (("src/fdsml/fingerprints.py",), ("tests/test_fingerprints.py", "tests/test_fingerprints_scope.py")),
    "atomic": (("src/fdsml/atomic.py",), ("tests/test_atomic.py", "tests/faults/test_atomic_outputs.py", "tests/faults/test_disk_full.py")),
    "losses": (("src/fdsml/losses/*",), ("tests/losses",)),
    # the fuzz test's child process reads a family attribute that mutmut's copy of the family lacks: it fails unmutated
    "ifs": (
        ("src/fdsml/ifs/*",),
        ("tests/ifs", "tests/faults/test_bad_inputs.py", "tests/families/test_finefractaldb_family.py",
         "--deselect", "tests/ifs/test_render.py::test_no_code_crashes_the_renderer"),
    ),  # fmt: skip
    "families": (("src/fdsml/families/*",), ("tests/families",)),
    "evaluation": (("src/fdsml/evaluation/*",), ("tests/evaluation", "tests/pipelines/test_robustness.py", "tests/pipelines/test_retrieval.py")),
    "descriptor_validation": (("src/fdsml/descriptor_validation/sweeps.py",), ("tests/descriptor_validation",)),
    "starting_points": (("src/fdsml/models/starting_points.py",), ("tests/models/test_starting_points.py", "tests/training/test_classification.py")),
    "data": (
        tuple(f"src/fdsml/data/{name}.py" for name in (
            "samplers", "classification_datasets", "retrieval_datasets", "image_records", "layout", "readers/omniglot", "readers/own_data", "readers/image_folder",
        )),
        ("tests/data",),
    ),
    "training": (
        tuple(f"src/fdsml/training/{name}" for name in ("objectives.py", "schedules.py", "optimizer.py", "resume.py", "pretrain_objectives/*", "classification.py", "retrieval.py", "comparison.py")),
        # the pipeline's retrieval tests reach the comparison and its examples; its run checks, the refusals of a
        # retrieval configuration (a Recall@K larger than a query searches, an option fdsml sets itself). Not
        # test_check_before_work.py: its `kedro run` in a child process finds no project in mutmut's copy
        ("tests/training", "tests/pipelines/test_retrieval.py", "tests/pipelines/test_run_checks.py"),
    ),
    # what a study's page says: its table (means, spreads, differences), its trend (the gaps, their line and
    # crossing), every axis added (the gap at the paper's regime), its cost in GPU-hours and its figure
    "study": (
        tuple(f"src/fdsml/tuning/study_{name}.py" for name in ("table", "trend", "projection", "cost", "figure")),
        tuple(f"tests/tuning/test_study_{name}.py" for name in ("table", "trend", "projection", "cost", "figure")),
    ),
}
"""Every unit's modules and tests. Triton's kernels (``ifs/render_triton.py``) are left out: they run on a GPU only."""
EXCLUDED = ("src/fdsml/ifs/render_triton.py",)


def configure(unit: str, folder: Path) -> None:
    """A scratch copy of the repository whose pyproject.toml tells mutmut this unit's modules and tests."""
    modules, tests = UNITS[unit]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name in COPIED:
        source, target = ROOT / name, folder / name
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, ignore=NOT_COPIED)
        else:
            shutil.copy2(source, target)
    text = (ROOT / "pyproject.toml").read_text()
    settings = {
        "source_paths": ["src/fdsml"],
        "only_mutate": list(modules),
        "do_not_mutate": list(EXCLUDED),
        "pytest_add_cli_args_test_selection": [*tests, "-m", "not slow"],
        "also_copy": ["conf/", "docs/", "README.md", "dvc.yaml", "params.yaml", "Makefile"],
        # mutmut stops a mutant's tests after (estimate + constant) * multiplier wall seconds, the estimate being the
        # tests' own time in its first run. That time leaves out what a test spends in spawned ranks and module
        # fixtures, so a tiny estimate stopped unmutated multi-process tests (a false kill); with 20 s of slack the
        # pre-training tests (estimated 28 s, run in 173 s) were stopped at 194 s whenever the machine was busy.
        "timeout_constant": 60.0,
        "timeout_multiplier": 4.0,
    }
    (folder / "pyproject.toml").write_text(text + "\n[tool.mutmut]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items()))


MUTMUT = [str(Path(sys.executable).with_name("mutmut"))]
# mutmut forks each mutant's test run from one process: Numba's default OpenMP layer aborts a forked child that runs a
# parallel kernel again (the Chamfer distance), and "workqueue" does not; the kernels' results are the same.
ENVIRONMENT = os.environ | {"OMP_NUM_THREADS": "1", "NUMBA_THREADING_LAYER": "workqueue"}


def run(unit: str) -> dict:
    """Run mutmut on ``unit`` afresh; its counts, score (killed and timed-out mutants over all of them) and minutes."""
    folder = WORK / unit
    configure(unit, folder)
    return _mutmut(unit, folder, [], "run.log")


def rerun_survivors(unit: str) -> dict:
    """Rerun the survivors (and untested mutants) of ``unit``'s last run with the current tests; the whole unit's counts
    afterwards."""
    folder = WORK / unit
    listed = folder / "survivors.txt"
    if not listed.is_file():
        raise SystemExit(f"{unit}: no finished run in {folder}; run `make mutation UNIT={unit}` first")
    names = [line.split(":")[0].strip() for line in listed.read_text().splitlines() if line.strip().endswith((": survived", ": no tests"))]
    for tests in (folder / "tests", folder / "mutants" / "tests"):
        shutil.copytree(ROOT / "tests", tests, dirs_exist_ok=True, ignore=NOT_COPIED)
    # mutmut maps only tests of a new name to the functions they reach; forgetting the map has every test, a changed
    # one too, mapped again (the unit's tests run once more) while the other mutants keep their verdicts
    (folder / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    return _mutmut(unit, folder, names, "survivors.log")


def sample(unit: str, size: int, seed: int) -> dict:
    """A seeded uniform sample of ``size`` of the unit's mutants run against the tests as they are, on every CPU the
    process may use; the sample's counts and the whole unit's score estimated from them, with a 95 % Wilson interval
    (without the finite-population correction, so a little wide)."""
    folder = WORK / unit
    configure(unit, folder)
    subprocess.run([sys.executable, "-c", GENERATE], cwd=folder, env=ENVIRONMENT, check=True, capture_output=True)
    names = _mutant_names_by_file(folder)
    population = sorted(name for file_names in names.values() for name in file_names)
    if not 0 < size <= len(population):
        raise SystemExit(f"--sample {size}: choose between 1 and the unit's {len(population)} mutants")
    chosen = set(random.Random(seed).sample(population, size))
    started = time.monotonic()
    estimates = _estimated_seconds(folder, sorted(chosen))  # collects the per-function coverage once, for every CPU
    groups = _split_by_file({file: [name for name in file_names if name in chosen] for file, file_names in names.items()}, estimates, sorted(os.sched_getaffinity(0)))
    runs = [_start_mutmut(folder, group, cpu, f"sample-cpu{cpu}.log") for cpu, group in groups.items() if group]
    for process in runs:
        if process.wait():
            raise SystemExit(f"{unit}: mutmut failed; see {folder}/sample-cpu*.log")
    minutes = (time.monotonic() - started) / 60
    statuses = _statuses(folder)
    counts = {status: sum(statuses[name] == status for name in chosen) for status in ("killed", "timeout", "survived", "no tests")}
    killed = counts["killed"] + counts["timeout"]
    interval = binomtest(killed, size).proportion_ci(confidence_level=0.95, method="wilson")  # stays inside [0, 1] near a score of 1
    listed = "".join(f"    {name}: {statuses[name]}\n" for name in sorted(chosen) if statuses[name] not in ("killed", "timeout"))
    (folder / "survivors.txt").write_text(listed)
    return {"unit": unit, "population": len(population), "size": size, "seed": seed, **counts, "score": killed / size, "interval": (interval.low, interval.high), "minutes": minutes}


# mutmut makes its mutants only inside `mutmut run`; a sample needs their names first. These are the steps `mutmut run`
# takes before it runs anything (mutmut is pinned in pyproject.toml's dev extra).
GENERATE = (
    "from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants, setup_source_paths\n"
    "copy_src_dir(); copy_also_copy_files(); setup_source_paths(); create_mutants(1)"
)


def _mutant_names_by_file(folder: Path) -> dict[str, list[str]]:
    """Every mutant's name, by the source file whose meta file records it (mutmut saves a file's verdicts together)."""
    return {str(meta.relative_to(folder / "mutants")): list(json.loads(meta.read_text())["exit_code_by_key"]) for meta in sorted((folder / "mutants").rglob("*.py.meta"))}


def _estimated_seconds(folder: Path, names: list[str]) -> dict[str, float]:
    """mutmut's estimate of each mutant's tests, in seconds (0 where no test reaches it)."""
    printed = subprocess.run([*MUTMUT, "print-time-estimates", *names], cwd=folder, env=ENVIRONMENT, capture_output=True, text=True, check=True).stdout
    asked = set(names)
    rows = (line.rsplit(" ", 1) for line in printed.splitlines() if line.strip())
    return {name: float(time_ms.removesuffix("ms")) / 1000 if time_ms.endswith("ms") else 0.0 for time_ms, name in rows if name in asked}


def _split_by_file(names_by_file: dict[str, list[str]], estimates: dict[str, float], cpus: list[int]) -> dict[int, list[str]]:
    """The mutants shared among the CPUs a whole source file at a time (two mutmut processes must not save the same
    meta file), the files with the longest estimated tests first, each to the CPU with the least estimated work so far
    (then the fewest mutants: mutants no test reaches cost nothing to mutmut's estimate, yet take a moment each)."""
    load = {cpu: (0.0, 0) for cpu in cpus}
    groups: dict[int, list[str]] = {cpu: [] for cpu in cpus}
    costs = [(sum(estimates.get(name, 0.0) for name in file_names), file_names) for file_names in names_by_file.values()]
    for seconds, file_names in sorted(costs, key=lambda cost: -cost[0]):
        cpu = min(cpus, key=lambda candidate: (load[candidate], candidate))
        groups[cpu] += file_names
        load[cpu] = (load[cpu][0] + seconds, load[cpu][1] + len(file_names))
    return groups


def _statuses(folder: Path) -> dict[str, str]:
    """Each mutant's verdict as mutmut words it (killed, survived, timeout, no tests, not checked, ...)."""
    printed = subprocess.run([*MUTMUT, "results", "--all", "true"], cwd=folder, env=ENVIRONMENT, capture_output=True, text=True, check=True).stdout
    return dict(line.strip().split(": ", 1) for line in printed.splitlines() if ": " in line)


def _start_mutmut(folder: Path, names: list[str], cpu: int, log_name: str) -> subprocess.Popen:
    """``mutmut run`` of ``names`` (every mutant when empty) in ``folder``, pinned to ``cpu``, its output in ``log_name``.

    One CPU: each mutant's tests run in a fork of mutmut's process, which ran them all once. faiss sizes its OpenMP
    team to the CPUs the process may use; a team started before a fork does not survive it, and a forked test that
    searches again waits on it forever (a false "timed out"). On one CPU faiss starts no team. (mutmut's forkserver
    isolation avoids it too, forking from a process that only collected the tests, but ran 2.5 times slower.)"""
    with (folder / log_name).open("w") as log:
        return subprocess.Popen([*MUTMUT, "run", "--max-children", "1", *names], cwd=folder, env=ENVIRONMENT, stdout=log, stderr=subprocess.STDOUT, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def _mutmut(unit: str, folder: Path, names: list[str], log_name: str) -> dict:
    """``mutmut run`` in ``folder`` (only ``names``, when given), then the unit's counts and its survivors listed."""
    started = time.monotonic()
    # MUTATION_CPU picks the CPU, so that two units run side by side.
    cpu = int(os.environ.get("MUTATION_CPU", min(os.sched_getaffinity(0))))
    if _start_mutmut(folder, names, cpu, log_name).wait():
        raise SystemExit(f"{unit}: mutmut failed; see {folder / log_name}")
    minutes = (time.monotonic() - started) / 60
    subprocess.run([*MUTMUT, "export-cicd-stats"], cwd=folder, env=ENVIRONMENT, capture_output=True, check=True)
    survivors = subprocess.run([*MUTMUT, "results"], cwd=folder, env=ENVIRONMENT, capture_output=True, text=True, check=True)
    (folder / "survivors.txt").write_text(survivors.stdout)
    counts = json.loads((folder / "mutants" / "mutmut-cicd-stats.json").read_text())
    killed = counts["killed"] + counts["timeout"]
    return {"unit": unit, **counts, "score": killed / max(counts["total"], 1), "minutes": minutes}


def main(arguments: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description="mutmut over the units of tests/mutation.py")
    parser.add_argument("units", nargs="*", metavar="UNIT", help=f"among {', '.join(UNITS)} (all when none)")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--survivors", action="store_true", help="rerun only the survivors of each unit's last run")
    only.add_argument("--sample", type=int, metavar="N", help="run a seeded sample of N of each unit's mutants")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    options = parser.parse_args(arguments)
    unknown = [unit for unit in options.units if unit not in UNITS]
    if unknown:
        raise SystemExit(f"unknown unit(s) {', '.join(unknown)}; choose among {', '.join(UNITS)}")
    for unit in options.units or UNITS:
        if options.sample:
            row = sample(unit, options.sample, options.seed)
            low, high = row["interval"]
            print(
                f"{unit}: sample of {row['size']} of {row['population']} mutants (seed {row['seed']}), "
                f"{row['killed'] + row['timeout']} killed, {row['survived']} survived, {row['no tests']} untested; "
                f"estimated score {100 * row['score']:.1f} % [{100 * low:.1f}, {100 * high:.1f}] (95 %) ({row['minutes']:.1f} min)",
                flush=True,
            )
            continue
        row = rerun_survivors(unit) if options.survivors else run(unit)
        print(
            f"{unit}: {row['total']} mutants, {row['killed'] + row['timeout']} killed, {row['survived']} survived, "
            f"{row['no_tests']} untested, score {100 * row['score']:.1f} % ({row['minutes']:.1f} min)",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
