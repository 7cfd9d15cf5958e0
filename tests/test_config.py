import pytest

from fdsml.analysis.config import parse_analysis_params
from fdsml.config import ConfigError, parse
from fdsml.pipelines.fractals.nodes import parse_fractals_params
from fdsml.pipelines.validate_descriptor.nodes import ValidateDescriptorConfig


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
    from pathlib import Path

    from kedro.config import OmegaConfigLoader

    from fdsml.analysis.config import parse_analysis_params
    from fdsml.config import parse
    from fdsml.pipelines.robustness.nodes import parse_robustness_params
    from fdsml.pipelines.validate_descriptor.nodes import ValidateDescriptorConfig
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
    conf = Path(__file__).resolve().parents[1] / "conf"
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
