"""The codes table at the boundary: a hand-edited or damaged table is refused before any work.

Pre-training and the descriptor validation trust every row to be a strictly contractive code
whose probabilities are its |det| weights. :func:`check_codes_table` verifies that once, with an
error naming the table, the row and the fix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fdsml.config import ConfigError
from fdsml.ifs.codes import determinant_probabilities, is_contractive, largest_singular_values
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
    for position in _suspect_rows(table):
        row = table.iloc[position]
        problem = _row_problem(row)
        if problem:
            raise CodesTableError(
                f"{name}: row {position} (class {row['class_id']}, instance {row['instance_id']}) {problem}; {FIX}"
            )


def _suspect_rows(table: pd.DataFrame) -> np.ndarray:
    """Positions of the rows that fail one of :func:`_row_problem`'s rules, every row checked at once
    (one pass over the table's maps instead of a Python step per row: 1M rows are checked in seconds)."""
    n_maps = table["n_maps"].to_numpy().astype(np.int64)
    coefficients, probabilities = table["coefficients"].to_numpy(), table["probabilities"].to_numpy()
    shaped = (
        (n_maps >= 1)
        & (np.fromiter(map(np.size, coefficients), np.int64, len(table)) == 6 * n_maps)
        & (np.fromiter(map(np.size, probabilities), np.int64, len(table)) == n_maps)
    )
    valid = shaped.copy()
    rows = np.flatnonzero(shaped)
    if rows.size:
        codes = np.concatenate(list(coefficients[rows])).astype(np.float64).reshape(-1, 6)
        weights = np.concatenate(list(probabilities[rows])).astype(np.float64)
        starts = np.concatenate([[0], np.cumsum(n_maps[rows])[:-1]])
        dets = np.abs(codes[:, 0] * codes[:, 3] - codes[:, 1] * codes[:, 2])
        totals = np.add.reduceat(dets, starts)
        with np.errstate(divide="ignore", invalid="ignore"):  # rows of singular maps only: refused below
            expected = dets / np.repeat(totals, n_maps[rows])
        per_map = np.isfinite(codes).all(axis=1) & (largest_singular_values(codes) < 1.0) & (np.abs(weights - expected) <= PROBABILITY_TOLERANCE)
        valid[rows] = np.logical_and.reduceat(per_map, starts) & (totals > 0)
    return np.flatnonzero(~valid)


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
