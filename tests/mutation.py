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

Not in CI: a unit takes minutes to an hour on 2 cores. Run it at low priority (the Makefile's ``nice -n 15``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

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
        ("tests/training", "tests/pipelines/test_retrieval.py"),  # the latter reaches the retrieval comparison and its examples
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


def _mutmut(unit: str, folder: Path, names: list[str], log_name: str) -> dict:
    """``mutmut run`` in ``folder`` (only ``names``, when given), then the unit's counts and its survivors listed."""
    started = time.monotonic()
    # One CPU: each mutant's tests run in a fork of mutmut's process, which ran them all once. faiss sizes its OpenMP
    # team to the CPUs the process may use; a team started before a fork does not survive it, and a forked test that
    # searches again waits on it forever (a false "timed out"). On one CPU faiss starts no team. (mutmut's forkserver
    # isolation avoids it too, forking from a process that only collected the tests, but ran 2.5 times slower.)
    # MUTATION_CPU picks the CPU, so that two units run side by side.
    cpu = int(os.environ.get("MUTATION_CPU", min(os.sched_getaffinity(0))))
    with (folder / log_name).open("w") as log:
        subprocess.run([*MUTMUT, "run", "--max-children", "1", *names], cwd=folder, env=ENVIRONMENT, stdout=log, stderr=subprocess.STDOUT, check=True, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    minutes = (time.monotonic() - started) / 60
    subprocess.run([*MUTMUT, "export-cicd-stats"], cwd=folder, env=ENVIRONMENT, capture_output=True, check=True)
    survivors = subprocess.run([*MUTMUT, "results"], cwd=folder, env=ENVIRONMENT, capture_output=True, text=True, check=True)
    (folder / "survivors.txt").write_text(survivors.stdout)
    counts = json.loads((folder / "mutants" / "mutmut-cicd-stats.json").read_text())
    killed = counts["killed"] + counts["timeout"]
    return {"unit": unit, **counts, "score": killed / max(counts["total"], 1), "minutes": minutes}


def main(arguments: list[str]) -> None:
    survivors_only = "--survivors" in arguments
    units = [argument for argument in arguments if argument != "--survivors"]
    unknown = [unit for unit in units if unit not in UNITS]
    if unknown:
        raise SystemExit(f"unknown unit(s) {', '.join(unknown)}; choose among {', '.join(UNITS)}")
    for unit in units or UNITS:
        row = rerun_survivors(unit) if survivors_only else run(unit)
        print(
            f"{unit}: {row['total']} mutants, {row['killed'] + row['timeout']} killed, {row['survived']} survived, "
            f"{row['no_tests']} untested, score {100 * row['score']:.1f} % ({row['minutes']:.1f} min)",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
