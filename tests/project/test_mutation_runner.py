"""The mutation runner's sample shares its mutants among the CPUs by whole source files, the longest first to the
least loaded CPU: two mutmut processes that saved verdicts into one meta file would overwrite each other's."""

from __future__ import annotations

from tests.mutation import _split_by_file


def test_each_file_goes_whole_to_one_cpu_longest_first_to_the_least_loaded():
    names_by_file = {
        "a.py.meta": ["a1", "a2"],  # 10 s
        "b.py.meta": ["b1"],  # 6 s
        "c.py.meta": ["c1", "c2", "c3"],  # 5 s
        "d.py.meta": [],
    }
    estimates = {"a1": 4.0, "a2": 6.0, "b1": 6.0, "c1": 1.0, "c2": 2.0, "c3": 2.0}

    groups = _split_by_file(names_by_file, estimates, [0, 1])

    # a (10 s) to CPU 0; b (6 s) to CPU 1, the less loaded; c (5 s) to CPU 1 again (6 s against 10 s)
    assert groups == {0: ["a1", "a2"], 1: ["b1", "c1", "c2", "c3"]}


def test_files_without_estimates_are_shared_by_their_mutants_count():
    groups = _split_by_file({"x.py.meta": ["x1", "x2"], "y.py.meta": ["y1"], "z.py.meta": ["z1"]}, {}, [3, 5])

    # x to CPU 3 (the lower of two idle ones), y to CPU 5 (no mutant yet), z to CPU 5 (one mutant against two)
    assert groups == {3: ["x1", "x2"], 5: ["y1", "z1"]}
