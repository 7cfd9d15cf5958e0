"""The codes table at the boundary: a hand-edited or damaged table is refused before any work.

Pre-training and the descriptor validation trust every row to be a strictly contractive code
whose probabilities are its |det| weights. :func:`check_codes_table` verifies that once, with an
error naming the table, the row and the fix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fdsml.config import ConfigError
from fdsml.ifs.codes import determinant_probabilities, is_contractive
from fdsml.ifs.finefractaldb import TABLE_COLUMNS

FIX = "fix that row, or delete the table and run `kedro run --pipelines=fractals` to generate it again"
PROBABILITY_TOLERANCE = 1e-6


class CodesTableError(ConfigError):
    """The codes table lacks a column or holds a row that is not a valid code."""


def check_codes_table(table: pd.DataFrame, name: str = "fractal_codes") -> None:
    """Raise :class:`CodesTableError` naming ``name``, the row and the fix, for the first invalid row."""
    missing = [column for column in TABLE_COLUMNS if column not in table.columns]
    if missing:
        raise CodesTableError(f"{name}: missing column(s) {', '.join(missing)}; delete the table and run `kedro run --pipelines=fractals`")
    if table.empty:
        raise CodesTableError(f"{name}: the table has no rows; run `kedro run --pipelines=fractals`")
    for position, (_, row) in enumerate(table.iterrows()):
        problem = _row_problem(row)
        if problem:
            raise CodesTableError(
                f"{name}: row {position} (class {row['class_id']}, instance {row['instance_id']}) {problem}; {FIX}"
            )


def _row_problem(row: pd.Series) -> str | None:
    """What is wrong with one row, or None."""
    coefficients = np.asarray(row["coefficients"], dtype=np.float64)
    probabilities = np.asarray(row["probabilities"], dtype=np.float64)
    n_maps = int(row["n_maps"])
    if coefficients.size != 6 * n_maps or probabilities.size != n_maps:
        return f"has {coefficients.size} coefficients and {probabilities.size} probabilities for n_maps={n_maps} (expected {6 * n_maps} and {n_maps})"
    if not np.all(np.isfinite(coefficients)):
        return "has NaN or infinite coefficients"
    code = coefficients.reshape(n_maps, 6)
    if not is_contractive(code):
        return "is not contractive (a map's largest singular value is >= 1)"
    try:
        expected = determinant_probabilities(code)
    except ValueError:
        return "has only singular maps"
    if not np.allclose(probabilities, expected, rtol=0, atol=PROBABILITY_TOLERANCE):
        return f"has probabilities {probabilities.round(6).tolist()} that do not match |det| ({expected.round(6).tolist()})"
    return None
