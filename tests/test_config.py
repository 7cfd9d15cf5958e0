import pytest

from fdsml.analysis.config import parse_analysis_params
from fdsml.config import ConfigError, parse, with_overlay
from fdsml.data.fractals_config import parse_fractals_params
from fdsml.descriptor_validation.measure import ValidateDescriptorConfig

from tests.support import ROOT


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_classe": 3}, r"fractals: unknown key\(s\) n_classe \(did you mean fractals\.n_classes\?\); accepted keys: .*n_classes"),
        ({"n_classes": "ten"}, r"fractals.n_classes: expected an integer"),
        ({"n_classes": 0}, r"fractals.n_classes: must be positive"),
        ({"instances_per_class": -2}, r"fractals.instances_per_class: must be positive"),
        ({"sampler": "gaussian"}, r"fractals.sampler: 'gaussian' is not accepted; choose one of 'sigma_factor', 'uniform'"),
        ({"render": {"mode": "splat"}}, r"fractals.render.mode: 'splat' is not accepted; choose one of 'point', 'patch'"),
        ({"render": {"size": 0}}, r"fractals.render: size"),
        ({"perturbation": {"factor_range": [1.4, 0.6]}}, r"fractals.perturbation.factor_range: range \[1.4, 0.6\] is empty or inverted"),
        ({"perturbation": {"factor_range": [0.6]}}, r"fractals.perturbation.factor_range: expected 2 values"),
        ({"sigma_factor": {"n_maps": [4, 2]}}, r"fractals.sigma_factor.n_maps: range \[4, 2\] is empty"),
        ({"class_filter": {"min_fill": 1.5}}, r"fractals.class_filter.min_fill: must lie in \[0, 1\]"),
        ({"class_filter": {"enabled": "yes"}}, r"fractals.class_filter.enabled: expected true or false"),
        ({"outputs": {"shard_size": 0}}, r"fractals.outputs.shard_size: must be positive"),
        ({"min_occupancy": 2}, r"fractals.min_occupancy: must lie in \[0, 1\]"),
        ("not a mapping", r"fractals: expected a mapping"),
    ],
)
def test_bad_fractal_parameters_name_the_key(params, message):
    with pytest.raises(ConfigError, match=message):
        parse_fractals_params(params)


def test_defaults_parse_into_typed_values():
    config = parse_fractals_params({"perturbation": {"factor_range": [0.5, 2]}}).spec.settings
    assert config.perturbation.factor_range == (0.5, 2.0)
    assert config.sampler == "sigma_factor"


def test_every_environment_parses_for_every_pipeline():
    """conf/base and conf/paper (merged over base) are valid for every pipeline's parser."""
    from kedro.config import OmegaConfigLoader

    from fdsml.analysis.config import parse_analysis_params
    from fdsml.config import parse
    from fdsml.pipelines.robustness.nodes import parse_robustness_params
    from fdsml.descriptor_validation.measure import ValidateDescriptorConfig
    from fdsml.training.classification import parse_classification_params
    from fdsml.training.pretrain import parse_pretrain_params
    from fdsml.training.retrieval import parse_retrieval_params

    parsers = {
        "fractals": parse_fractals_params,
        "pretrain": parse_pretrain_params,
        "retrieval": parse_retrieval_params,
        "classification": parse_classification_params,
        "robustness": parse_robustness_params,
        "analysis": parse_analysis_params,
        "validate_descriptor": lambda raw: parse(ValidateDescriptorConfig, raw, "validate_descriptor"),
    }
    conf = ROOT / "conf"
    for env in ("base", "paper"):
        loader = OmegaConfigLoader(str(conf), base_env="base", default_run_env=env, merge_strategy={"parameters": "soft"})
        params = loader["parameters"]
        for name, parser in parsers.items():
            parser(params[name])


@pytest.mark.parametrize("seed", [-1, 2**63])
@pytest.mark.parametrize(
    "parse_params, key",
    [
        (parse_fractals_params, "fractals.seed"),
        (parse_analysis_params, "analysis.seed"),
        (lambda params: parse(ValidateDescriptorConfig, params, "validate_descriptor"), "validate_descriptor.seed"),
    ],
)
def test_a_seed_outside_what_numpy_and_the_renderer_take_is_refused_naming_the_key(parse_params, key, seed):
    with pytest.raises(ConfigError, match=rf"^{key}: must lie in \[0, 2\*\*63\), got {seed}$"):
        parse_params({"seed": seed})


BASE = {"train": {"seed": 0, "steps": 10}, "data": {"sizes": [32, 64], "root": None}, "objective": "fdsl", "probe": None}


def test_an_overlay_merges_nested_mappings_and_dotted_keys_alike():
    expected = {"train": {"seed": 3, "steps": 10}, "data": {"sizes": [32, 64], "root": "x"}, "objective": "fdsl", "probe": None}
    assert with_overlay(BASE, {"train": {"seed": 3}, "data": {"root": "x"}}) == expected
    assert with_overlay(BASE, {"train.seed": 3, "data.root": "x"}) == expected
    assert with_overlay(BASE, {"train": {"seed": 1}, "train.seed": 3, "data": {"root": "x"}}) == expected  # in order: the last wins


def test_an_overlay_replaces_lists_and_values_whole_and_adds_missing_sections():
    changed = with_overlay(BASE, {"data.sizes": [16], "train": None, "probe": {"k": 1}, "new.deep.key": 2})
    assert changed == {
        "train": None,
        "data": {"sizes": [16], "root": None},
        "objective": "fdsl",
        "probe": {"k": 1},  # a null section counts as an empty one
        "new": {"deep": {"key": 2}},
    }


def test_an_overlay_never_changes_its_inputs_nor_shares_their_mappings():
    base, overlay = {"train": {"seed": 0}, "data": {"sizes": [32]}}, {"train": {"seed": 1}, "model": {"dims": [8]}}
    changed = with_overlay(base, overlay)
    changed["data"]["sizes"].append(64)
    changed["model"]["dims"].append(16)
    assert base == {"train": {"seed": 0}, "data": {"sizes": [32]}} and overlay == {"train": {"seed": 1}, "model": {"dims": [8]}}


@pytest.mark.parametrize(
    "overlay, message",
    [
        ({"train.seed.low": 1}, r"train\.seed\.low: train\.seed holds a value \(0\), not a section"),
        ({"objective": {"name": "pml"}}, r"objective: objective holds a value \('fdsl'\), not a section"),
    ],
)
def test_a_key_whose_parent_is_a_value_is_refused_naming_it(overlay, message):
    for only_existing in (False, True):
        with pytest.raises(ConfigError, match=message):
            with_overlay(BASE, overlay, only_existing=only_existing)


@pytest.mark.parametrize(
    "key, message",
    [
        ("train.sead", r"train\.sead: not a key of the configuration"),
        ("trian.seed", r"trian\.seed: trian is not a section"),
        ("probe.k", r"probe\.k: probe is not a section"),
    ],
)
def test_only_existing_refuses_a_key_the_configuration_lacks(key, message):
    with pytest.raises(ConfigError, match=message):
        with_overlay(BASE, {key: 1}, only_existing=True)
    assert with_overlay(BASE, {"train.seed": 5, "data.root": "x"}, only_existing=True)["train"] == {"seed": 5, "steps": 10}
