"""The registry of pre-training objectives: every registered objective keeps the contract pre-training relies on,
so a new one (one module in ``fdsml.training.pretrain_objectives``) is checked here the day it is added."""

import dataclasses
from pathlib import Path

import pytest
import torch
import yaml

from fdsml.config import ConfigError
from fdsml.training.pretrain import PretrainConfig, build_objective, parse_pretrain_params
from fdsml.fingerprints import field_defines
from fdsml.training.pretrain_objectives import ObjectiveRecipe, known_objectives, objective_recipe, register_objective, with_objective_sections

from tests.training.helpers import tiny_config
from .tiny_batch import EMBEDDINGS, LABELS, MARGIN, SAME_TRIPLETS, Fixed, hand_batch, hinge, label_triplets

CONF_BASE = yaml.safe_load((Path(__file__).resolve().parents[3] / "conf" / "base" / "parameters_pretrain.yml").read_text())["pretrain"]


def test_every_objective_of_the_project_is_registered_from_a_module_of_its_name():
    """The registry finds them itself: nothing names them in the package's ``__init__`` (docs/plugins.md)."""
    assert set(known_objectives()) >= {"fdsl", "fdsl_pa", "label_triplet", "pa_triplet", "pml"}
    for name in known_objectives():
        module = type(objective_recipe(name)).__module__
        assert objective_recipe(name).name == name
        assert module == f"fdsml.training.pretrain_objectives.{name}" or not module.startswith("fdsml."), module


def test_an_unknown_objective_is_refused_naming_the_key_and_every_registered_one():
    listed = ", ".join(f"'{name}'" for name in known_objectives())
    assert listed.startswith("'fdsl', 'fdsl_pa', 'label_triplet', 'pa_triplet', 'pml'")  # sorted
    with pytest.raises(ConfigError, match=rf"^pretrain.objective: 'arcface' is not accepted; choose one of {listed}$"):
        parse_pretrain_params({"objective": "arcface"})


def test_a_second_objective_of_a_registered_name_is_refused():
    class Again(ObjectiveRecipe):
        name = "pml"

    with pytest.raises(ValueError, match="'pml' is already registered"):
        register_objective(Again)
    assert type(objective_recipe("pml")).__name__ == "PairLoss"


@pytest.mark.parametrize("name", known_objectives())
def test_every_objective_has_its_settings_section_and_runs_on_its_defaults_without_a_block(name):
    """``pretrain.<name>`` is a field of the configuration (parsed; fingerprinted when selected); without a block the
    objective runs on its settings' defaults, and a block in conf/base, where there is one, lists each of its keys."""
    default = getattr(PretrainConfig(), name)
    assert isinstance(default, objective_recipe(name).settings)
    assert parse_pretrain_params({"objective": name}).objective_settings == objective_recipe(name).settings()
    if name in CONF_BASE:
        assert set(CONF_BASE[name]) == {field.name for field in dataclasses.fields(default)}
        parsed = parse_pretrain_params({"objective": name, name: CONF_BASE[name]})
        assert parsed.objective_settings == getattr(parsed, name) and dataclasses.asdict(parsed.objective_settings) == CONF_BASE[name]


@pytest.mark.parametrize("name", known_objectives())
def test_every_objective_builds_what_the_loop_calls_and_its_head_reads_the_models_output(name):
    """A finite loss with a gradient into the model's output, named parts, and parameter groups; a classifier
    objective reads logits over the training classes, every other one the embedding."""
    config = parse_pretrain_params({"objective": name})
    objective = build_objective(config, num_classes=2, embedding_dim=2)
    outputs = EMBEDDINGS.clone().requires_grad_(True)
    loss, parts = objective(Fixed(), hand_batch(outputs), 0)
    loss.backward()
    assert torch.isfinite(loss) and loss.dim() == 0 and isinstance(parts, dict)
    assert outputs.grad is not None and outputs.grad.abs().sum() > 0
    assert isinstance(objective.param_groups(), list)
    assert config.recipe.head in ("classifier", "embedding") and config.batches.kind in ("shuffled", "class_balanced", "explicit_triplets")


@pytest.mark.parametrize("objective", ["pa_triplet", "fdsl_pa", "label_triplet"])
@pytest.mark.parametrize("reducer", ["mean", "avg_nonzero"])
def test_every_triplet_objective_takes_its_reducer_from_the_configuration(objective, reducer, tmp_path):
    """The gradient-fading diagnostic: ``avg_nonzero`` divides by the violating triplets, ``mean`` by all, whichever
    objective carries the triplet term, and each logs the share of non-zero triplets."""
    loss_settings = {"reducer": reducer, "margin": MARGIN, "normalize_embeddings": False}
    if objective != "label_triplet":
        loss_settings["graded_margin"] = False  # one margin for every hand-computed hinge (fdsl_pa's default grades it)
    config = tiny_config(tmp_path, objective=objective, **{objective: loss_settings})
    built = build_objective(config, num_classes=2, embedding_dim=2)
    loss, parts = built(Fixed(), hand_batch())
    triplets = label_triplets(LABELS) if objective == "label_triplet" else SAME_TRIPLETS
    hinges = [hinge(*t) for t in triplets]
    nonzero = sum(h > 0 for h in hinges)
    assert 0 < nonzero < len(hinges)  # the case tells the reducers apart
    expected = sum(hinges) / (nonzero if reducer == "avg_nonzero" else len(hinges))
    term = parts["triplet_loss"] if objective == "fdsl_pa" else loss
    assert term.item() == pytest.approx(expected, rel=1e-6)
    suffix = "labels" if objective == "label_triplet" else "same"
    assert parts[f"nonzero_fraction_{suffix}"].item() == pytest.approx(nonzero / len(hinges))


@pytest.mark.parametrize("section", ["fdsl_pa", "label_triplet", "pml"])
def test_the_tuned_objectives_code_defaults_are_conf_bases_values(section):
    """A study searches ``pretrain.<section>.<key>``: conf/base writes the value the code defaults to (the tuned
    recipe); pa_triplet's and fdsl's blocks hold tuned values on top of the method's defaults."""
    default = getattr(PretrainConfig(), section)
    assert CONF_BASE[section] == {f.name: getattr(default, f.name) for f in dataclasses.fields(default)}


def test_the_objective_sections_are_one_frozen_field_per_objective_defining_only_when_selected():
    """Applied to a fresh section here (pre-training's own configuration got its fields at import)."""

    @dataclasses.dataclass(frozen=True)
    class Section:
        """A configuration section."""

        objective: str = "fdsl"

    made = with_objective_sections(Section)
    assert (made.__name__, made.__qualname__, made.__module__, made.__doc__) == (
        Section.__name__, Section.__qualname__, Section.__module__, "A configuration section.",
    )  # fmt: skip
    assert issubclass(made, Section)
    assert [field.name for field in dataclasses.fields(made)] == ["objective", *known_objectives()]
    chosen = made(objective="pml")
    for name in known_objectives():
        assert getattr(chosen, name) == objective_recipe(name).settings()
    defines = {field.name: field_defines(field, chosen) for field in dataclasses.fields(made)}
    assert defines == {"objective": True} | {name: name == "pml" for name in known_objectives()}
    with pytest.raises(dataclasses.FrozenInstanceError):
        chosen.objective = "fdsl"


def test_a_registered_objective_is_found_by_its_name_and_reads_normalised_features_unless_a_triplet_says_not(monkeypatch):
    from fdsml.training.pretrain_objectives import recipe as recipes

    monkeypatch.setattr(recipes, "_RECIPES", dict(recipes._RECIPES))  # the registry as it was, after the test

    class Probe(ObjectiveRecipe):
        name = "probe_only"
        settings = dict

    assert register_objective(Probe) is Probe and isinstance(objective_recipe("probe_only"), Probe)
    assert objective_recipe("probe_only").normalized_distances({}) is True  # features read normalised, as retrieval does
    triplet = objective_recipe("pa_triplet")
    assert triplet.normalized_distances(triplet.settings(normalize_embeddings=False)) is False


def test_what_a_batch_must_hold_follows_the_mined_filter_and_the_batches():
    """``same`` needs three instances of the anchor's class, ``each`` two and a second class, ``all`` and ``diff`` one;
    shuffled batches and explicit triplets promise nothing of a class."""
    from fdsml.training.pretrain_objectives.recipe import BatchNeed

    recipe = objective_recipe("pa_triplet")
    needs = lambda **settings: recipe.batch_needs(recipe.settings(**settings))
    assert needs(filter="same") == (BatchNeed("instances_per_class", 3, "filter 'same' needs at least 3 instances of the anchor's class per batch"),)
    assert needs(filter="each") == (
        BatchNeed("instances_per_class", 2, "filter 'each' needs at least 2 instances of the anchor's class per batch"),
        BatchNeed("classes_per_batch", 2, "filter 'each' needs at least 2 classes per batch"),
    )
    assert needs(filter="same", mode="explicit") == () and needs(filter="all") == ()  # all: plain shuffled batches
    fdsl_pa = objective_recipe("fdsl_pa")
    assert [need.at_least for need in fdsl_pa.batch_needs(fdsl_pa.settings(filter="diff"))] == [1]
