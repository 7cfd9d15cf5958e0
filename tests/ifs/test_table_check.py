"""The codes table's one-pass screen: it flags exactly the rows a rule refuses (a missed row lets a bad code train,
a false flag costs a million-row table its speed), and the refusal names the first of them."""

import numpy as np
import pandas as pd
import pytest

from fdsml.ifs.codes import determinant_probabilities
from fdsml.ifs.table_check import CodesTableError, _suspect_rows, check_codes_table

ONE_MAP = [[0.5, 0.1, -0.2, 0.4, 0.3, -0.1]]
THREE_MAPS = [[0.5, 0.1, -0.2, 0.4, 0.3, -0.1], [-0.3, 0.2, 0.25, 0.35, -0.5, 0.2], [0.6, 0.0, 0.0, 0.2, 0.1, 0.9]]
UNIT_SINGULAR_VALUE = [[1.0, 0.0, 0.0, 0.5, 0.0, 0.0], [0.3, 0.0, 0.0, 0.3, 0.0, 0.0]]  # largest singular value exactly 1
SINGULAR = [[0.5, 0.25, 0.4, 0.2, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.1, 0.1]]  # det 0 in every map


def row(code, probabilities=None):
    code = np.asarray(code, dtype=np.float64)
    weights = determinant_probabilities(code).tolist() if probabilities is None else probabilities
    return {"n_maps": code.shape[0], "coefficients": code.reshape(-1).tolist(), "probabilities": weights}


def table(*rows) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows))
    frame.insert(0, "instance_id", range(len(frame)))
    frame.insert(0, "class_id", 0)
    return frame.assign(psi=[[0.0] * 6] * len(frame), seed=0, occupancy=0.5, position=0, factor=1.0)


def test_valid_codes_of_one_or_several_maps_raise_no_suspicion():
    valid = table(row(ONE_MAP), row(THREE_MAPS), row(ONE_MAP), row(THREE_MAPS))
    assert _suspect_rows(valid).tolist() == []
    check_codes_table(valid)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (row(UNIT_SINGULAR_VALUE), "is not contractive"),
        (row(SINGULAR, [0.5, 0.5]), "has only singular maps"),
        (row(THREE_MAPS, [p + d for p, d in zip(determinant_probabilities(np.array(THREE_MAPS)), (2e-6, -2e-6, 0.0))]), "has probabilities .* that do not match"),
        (row(THREE_MAPS, [1.0, 0.0]), "has 18 coefficients and 2 probabilities for n_maps=3"),
        ({"n_maps": 0, "coefficients": [], "probabilities": []}, "has only singular maps"),  # no map, so none weighs
    ],
    ids=["unit-singular-value", "all-singular", "probabilities", "probability-count", "no-map"],
)
def test_exactly_the_broken_row_is_flagged_and_named(bad, message):
    damaged = table(row(ONE_MAP), row(THREE_MAPS), bad, row(THREE_MAPS))
    assert _suspect_rows(damaged).tolist() == [2]
    with pytest.raises(CodesTableError, match=f"^my_codes: row 2 \\(class 0, instance 2\\) {message}"):
        check_codes_table(damaged, "my_codes")
