"""The family registry and the one parameter that selects a family."""

import pytest

from fdsml.config import ConfigError
from fdsml.families import FamilySpec, check_every_block, family_spec, get_family, known_families, register_family, unregister_family
from fdsml.families.finefractaldb import FINEFRACTALDB
from fdsml.ifs.finefractaldb import FineFractalDBConfig

from .discs import DISCS, Discs, DiscSettings


def test_finefractaldb_is_the_default_family_and_keeps_its_flat_settings():
    spec = family_spec({"seed": 3, "render": {"size": 32}, "outputs": {"materialize": False}})
    assert spec.family is FINEFRACTALDB and spec == FamilySpec(FINEFRACTALDB, FineFractalDBConfig(seed=3, render=spec.settings.render))
    assert spec.size == 32 and len(spec.descriptor_names) == 6


def test_an_unknown_family_is_named_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"fractals\.family: unknown formula family 'visualatom'; known families: finefractaldb"):
        family_spec({"family": "visualatom"})
    with pytest.raises(ConfigError, match=r"pretrain\.family: unknown formula family"):
        get_family("nope", "pretrain.family")


def test_a_registered_family_reads_its_own_block_and_ignores_the_others(discs):
    params = {"family": "discs", "seed": 1, "render": {"size": 64}, "discs": {"n_classes": 2, "size": 12}, "outputs": {}}
    spec = family_spec(params)
    assert spec.family is discs and spec.settings == DiscSettings(n_classes=2, size=12)
    assert "discs" in known_families()
    with pytest.raises(ConfigError, match=r"fractals\.discs: unknown key\(s\) points"):
        family_spec({"family": "discs", "discs": {"points": 5}})
    # FineFractalDB, selected, skips another family's block instead of refusing it as an unknown key
    assert family_spec({**params, "family": "finefractaldb"}).settings.render.size == 64


def test_a_second_family_of_the_same_name_is_refused(discs):
    register_family(discs)  # the same object again is harmless
    with pytest.raises(ValueError, match="'discs' is already registered"):
        register_family(Discs())
    with pytest.raises(TypeError, match="Family instance"):
        register_family(Discs)


def test_the_top_level_keys_stay_finefractaldbs_and_are_checked_whichever_family_is_selected():
    """A family without a block runs on its defaults; the top-level keys, read by nobody then, are still checked as
    FineFractalDB's, so a misspelt one is refused before it could matter."""
    params = {"family": "rcdb", "n_classes": 3, "render": {"size": 16}}
    assert family_spec(params).settings == get_family("rcdb").settings_type()
    check_every_block(params)
    with pytest.raises(ConfigError, match=r"^fractals: unknown key\(s\) n_clases"):
        check_every_block({"family": "rcdb", "n_clases": 3})


def test_every_family_block_is_checked_not_only_the_selected_one():
    """A misspelt key in the block of a family not selected is refused now, under the block's own key."""
    check_every_block({"family": "finefractaldb", "rcdb": {"vertices_mean": 50.0}, "outputs": {}, "holdout": {}})
    with pytest.raises(ConfigError, match=r"^pretrain\.fractals\.rcdb: unknown key\(s\) vertices_men"):
        check_every_block({"family": "finefractaldb", "rcdb": {"vertices_men": 50.0}}, "pretrain.fractals")
    with pytest.raises(ConfigError, match=r"^pretrain\.fractals\.visual_atom: unknown key\(s\) bogus"):
        check_every_block({"family": "visual_atom", "visual_atom": {"bogus": 1}}, "pretrain.fractals")


def test_a_family_unregistered_is_no_longer_known():
    register_family(DISCS)
    unregister_family(DISCS.name)
    assert DISCS.name not in known_families()
    unregister_family(DISCS.name)  # forgetting one not registered is harmless
