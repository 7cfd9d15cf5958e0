"""What one combination of the generator grid saves by sharing work, measured in one run (the figures must not change).

    python benchmarks/validation_sharing.py

On the full scale's default table (50 x 100, ``generator_variants.SCALES["full"]``), in CPU seconds:
the four filters' 3,000 triplets each measured filter by filter in chunks of 256 (each chunk renders
its rows, as every filter did alone) against all four stacked in one chunk (each row rendered
once); and the codes table checked row by row (the per-row rules on every row) against the
one-pass screen of ``check_codes_table``. Prints both ratios; the figures must be equal.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generator_variants import SCALES, base_parameters  # noqa: E402

from fdsml.config import with_overlay  # noqa: E402
from fdsml.families import family_spec  # noqa: E402
from fdsml.ifs.table_check import _row_problem, check_codes_table  # noqa: E402
from fdsml.losses.candidates import FILTERS  # noqa: E402
from fdsml.pipelines.fractals.nodes import generate_fractal_codes  # noqa: E402
from fdsml.validation.agreement import measure_all_filters, measure_triplets  # noqa: E402


def cpu(action):
    """(result, CPU seconds of this process) of ``action()``."""
    started = time.process_time()
    result = action()
    return result, time.process_time() - started


def main() -> None:
    params = with_overlay(base_parameters(), SCALES["full"], only_existing=True)
    table, _ = generate_fractal_codes(params["fractals"], None, None)
    spec = family_spec(params["fractals"], "fractals")
    n_triplets = params["validate_descriptor"]["n_triplets"]
    measure_all_filters(table, spec, 4, np.random.default_rng(0))  # compile the kernels first

    def filter_by_filter():
        rng = np.random.default_rng(0)
        return pd.concat([measure_triplets(table, spec, name, n_triplets, rng, chunk_size=256) for name in FILTERS], ignore_index=True)

    alone, alone_s = cpu(filter_by_filter)
    together, together_s = cpu(lambda: measure_all_filters(table, spec, n_triplets, np.random.default_rng(0), chunk_size=len(FILTERS) * n_triplets))
    pd.testing.assert_frame_equal(alone, together)
    problems, per_row_s = cpu(lambda: [_row_problem(row) for _, row in table.iterrows()])
    _, screened_s = cpu(lambda: check_codes_table(table))
    assert not any(problems)
    print(f"table {len(table)} rows, {n_triplets} triplets per filter (CPU seconds, one process)")
    print(f"triplets: filter by filter, chunks of 256 {alone_s:.2f} s; stacked, each row once {together_s:.2f} s; ratio {alone_s / together_s:.1f}x")
    print(f"table check: row by row {per_row_s:.3f} s; one pass {screened_s:.3f} s; ratio {per_row_s / screened_s:.0f}x")


if __name__ == "__main__":
    main()
