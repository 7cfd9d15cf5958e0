"""Table generation for any family: class replacement and its limit, reuse of a stored table, shards, table checks."""

import logging

import numpy as np
import pandas as pd
import pytest

from fdsml.config import ConfigError
from fdsml.errors import GenerationError
from fdsml.families import FamilySpec, family_spec, scale_descriptor
from fdsml.families.generation import generate_class, generate_table, is_up_to_date, render_shards, shards_fingerprint

from .discs import Discs, DiscSettings

SMALL_FINEFRACTALDB = {"class_filter": {"enabled": False}, "render": {"size": 32, "points": 500}}
"""FineFractalDB settings that generate in a blink: no class filter, 32 px of 500 points."""


class FirstCodeTooLarge(Discs):
    """Discs whose first class code of every class is too large for any instance to fit (perturb refuses it)."""

    name = "discs_first_too_large"

    def sample_class(self, rng, settings, counts):
        code = super().sample_class(rng, settings, counts)
        return (0.9, code[1]) if counts["codes_sampled"] == 1 else code


class NeverFits(Discs):
    name = "discs_never_fit"

    def sample_class(self, rng, settings, counts):
        super().sample_class(rng, settings, counts)
        return (0.9, 0.8)


def test_a_class_code_whose_instances_keep_failing_is_replaced_and_counted(caplog):
    spec = FamilySpec(FirstCodeTooLarge(), DiscSettings(max_attempts=5))
    with caplog.at_level(logging.DEBUG, logger="fdsml.families.generation"):
        rows, counts = generate_class(spec, 3)
    assert len(rows) == 4 and counts["codes_sampled"] == 2 and counts["replacements"] == 1
    assert counts["invalid_rejections"] == 5 and counts["instance_draws"] == 5 + 4  # one code's 5 draws, then 4 at once
    assert "class 3: an instance failed 5 times, replacing the class code" in caplog.messages


def test_a_class_is_given_up_after_its_replacements_naming_the_settings_to_change():
    """max_class_replacements 2: the first code and two replacements, three codes in all, then a clear error."""
    family, sampled = NeverFits(), []
    family.sample_class = lambda rng, settings, counts: sampled.append(1) or NeverFits.sample_class(family, rng, settings, counts)
    with pytest.raises(GenerationError) as failed:
        generate_class(FamilySpec(family, DiscSettings(max_attempts=5, max_class_replacements=2)), 1)
    assert len(sampled) == 3
    assert str(failed.value) == (
        "class 1: an instance failed 5 draws in each of 3 class codes of family 'discs_never_fit'; raise "
        "fractals.max_class_replacements or the family's attempts, or lower fractals.min_occupancy"
    )


def test_a_stored_table_is_reused_only_with_its_own_summary_settings_and_bytes():
    spec = FamilySpec(Discs(), DiscSettings())
    table, summary = generate_table(spec)
    assert is_up_to_date(table, summary, spec)
    assert not is_up_to_date(None, summary, spec) and not is_up_to_date(table, None, spec)
    assert not is_up_to_date(table, summary, FamilySpec(Discs(), DiscSettings(seed=1)))
    changed = table.copy()
    changed.loc[0, "occupancy"] += 0.01
    assert not is_up_to_date(changed, summary, spec)


def test_shards_render_the_rows_in_order_alike_in_worker_processes():
    spec = family_spec(SMALL_FINEFRACTALDB | {"n_classes": 2, "instances_per_class": 3})
    table, _ = generate_table(spec)
    alone = np.concatenate(list(render_shards(table, spec, shard_size=4)))
    np.testing.assert_array_equal(alone, spec.render_rows(table))
    np.testing.assert_array_equal(np.concatenate(list(render_shards(table, spec, shard_size=4, workers=2))), alone)


def test_the_shards_fingerprint_follows_the_table_and_the_settings():
    spec = FamilySpec(Discs(), DiscSettings())
    reference = shards_fingerprint("abc", spec)
    assert shards_fingerprint("abc", FamilySpec(Discs(), DiscSettings())) == reference
    assert shards_fingerprint("abd", spec) != reference
    assert shards_fingerprint("abc", FamilySpec(Discs(), DiscSettings(size=24))) != reference


def test_a_table_that_cannot_be_the_familys_is_refused_saying_what_is_wrong_and_the_fix():
    spec = FamilySpec(Discs(), DiscSettings())
    table, _ = generate_table(spec)
    fix = "delete the table and run `kedro run --pipelines=fractals`"
    with pytest.raises(ConfigError) as refused:
        spec.check_table(table.drop(columns=["psi", "seed"]), "codes")
    assert str(refused.value) == f"codes: missing column(s) psi, seed of family 'discs'; {fix}"
    with pytest.raises(ConfigError) as refused:
        spec.check_table(table.iloc[:0], "codes")
    assert str(refused.value) == "codes: the table has no rows; run `kedro run --pipelines=fractals`"
    short = table.assign(psi=[value[:1] if index == 2 else value for index, value in enumerate(table["psi"])])
    with pytest.raises(ConfigError) as refused:
        spec.check_table(short, "codes")
    assert str(refused.value) == f"codes: psi has length(s) [1, 2], family 'discs' has 2; {fix}"


def test_a_descriptor_is_scaled_by_its_ranges_and_a_range_of_one_value_is_left_unscaled():
    scaled = scale_descriptor([0.35, 2.0, 7.0], [(0.1, 0.6), (-2.0, 2.0), (5.0, 5.0)])
    np.testing.assert_allclose(scaled, [0.5, 1.0, 2.0], rtol=1e-15)
    assert scaled.dtype == np.float64


def test_the_table_and_its_summary_do_not_depend_on_the_worker_processes():
    """Classes are drawn from their own seeds: two spawned workers give the one-process table, byte for byte."""
    params = SMALL_FINEFRACTALDB | {"n_classes": 8, "instances_per_class": 2}
    alone, alone_summary = generate_table(family_spec(params))
    shared, shared_summary = generate_table(family_spec({**params, "workers": 2}))
    pd.testing.assert_frame_equal(shared, alone)
    assert {key: value for key, value in shared_summary.items() if key != "seconds"} == {
        key: value for key, value in alone_summary.items() if key != "seconds"
    }
    assert 0 <= alone_summary["seconds"] < 600


def test_the_summary_counts_the_classes_draws_and_replacements_by_name():
    spec = FamilySpec(FirstCodeTooLarge(), DiscSettings(n_classes=2, instances_per_class=3, max_attempts=4))
    _, summary = generate_table(spec)
    assert (summary["n_classes"], summary["instances_per_class"], summary["n_instances"]) == (2, 3, 6)
    assert summary["class_replacements"] == 2  # each class's first code replaced once
    assert summary["instance_draws"] == 2 * (4 + 3) and summary["instance_invalid_rejections"] == 2 * 4
    assert summary["definition"] == spec.family.describe(spec.settings)
