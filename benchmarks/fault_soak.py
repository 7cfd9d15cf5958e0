"""A longer kill soak than the test suite's: ``python benchmarks/fault_soak.py --scale 5 --seed 1``.

Runs ``tests/faults/kill_harness.py`` (scale x 20 SIGKILLs at seeded moments across the pipelines,
each followed by a run to the end) and prints its JSON report: kills, partial files seen (must be
none), outputs that differ from an uninterrupted run (must be none) and the seconds it took.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faults.kill_harness import soak  # noqa: E402

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        report = soak(Path(folder) / "soak", args.scale, args.seed)
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))
