"""The fair comparison of the pre-training objectives (conf/fair): one budget for every arm (``tune.arm``), the recorded
recipes the study files measure, and the defaults they set."""

import pytest
import yaml

from fdsml.config import env_parameters, with_overlay
from fdsml.training.pretrain import parse_pretrain_params
from fdsml.tuning.config import parse_tune_params
from fdsml.tuning.objective import TrialObjective
from fdsml.tuning.study import check_study
from fdsml.tuning.space import overlay
from tests.support import ROOT

TUNED_RECIPES = ROOT / "conf/fair/tuned_recipes.yml"
RECIPE_FILES = [TUNED_RECIPES, ROOT / "conf/fair/tuned_recipes_round2.yml"]


@pytest.fixture(scope="module")
def params():
    return env_parameters(str(ROOT / "conf"), "fair")


def test_every_arm_shares_the_budget_and_tunes_keys_its_objective_reads(params):
    tune = params["tune"]
    assert tune["validation_dataset"] == "omniglot_validation"
    assert params["pretrain"]["validation"]["probe"]["max_images"] is None  # all 440 validation images
    assert params["fractals"]["render"]["size"] == 48  # measured (conf/studies/fair_comparison.yml) at the size it was tuned at
    recipes = {path: yaml.safe_load(path.read_text()) for path in RECIPE_FILES}
    for arm, chosen in tune["arms"].items():
        config = parse_tune_params(tune | {"arm": arm})  # the shared budget, sampler and pruner; its own space after the rate
        assert config.study == f"fair_{arm}" and config.parameters[0].key == "pretrain.optimizer.base_lr"
        assert (config.budget.n_trials, config.sampler.seed, config.pruner.name) == (tune["budget"]["n_trials"], 0, "median")
        pretrain = with_overlay(params["pretrain"], config.arm_pretrain)
        drawn = {parameter.key: parameter.low if parameter.choices is None else parameter.choices[-1] for parameter in config.parameters}
        tuned = overlay({"pretrain": pretrain}, drawn)["pretrain"]  # ConfigError for a key the configuration lacks
        objective = parse_pretrain_params(tuned | {"run_dir": "unused"}).objective
        assert any(recipe.get(chosen["method"], {}).get("objective") == objective for recipe in recipes.values()), arm
        check_study(TrialObjective(config, {"pretrain": pretrain, "retrieval": params["retrieval"]}, inputs=None))  # every extreme, the baseline


def test_an_arm_the_configuration_lacks_is_refused_naming_the_closest(params):
    with pytest.raises(Exception, match=r"tune.arm: 'fdls' is not one of tune.arms \(did you mean fdsl\?\)"):
        parse_tune_params(params["tune"] | {"arm": "fdls"})


def test_the_defaults_carry_the_recorded_recipes(params):
    """conf/base's objective blocks, its default objective's rate and conf/cpu's FDSL are the recipes the studies chose."""
    recorded = yaml.safe_load(TUNED_RECIPES.read_text())
    base, cpu = env_parameters(str(ROOT / "conf"), "base")["pretrain"], env_parameters(str(ROOT / "conf"), "cpu")["pretrain"]
    for method, block in (("fdsl", "fdsl"), ("same", "pa_triplet"), ("fdsl_pa", "fdsl_pa"), ("label_triplet", "label_triplet")):
        assert recorded[method][block].items() <= base[block].items(), method
    assert (base["objective"], base["pa_triplet"]["filter"], base["optimizer"]["base_lr"]) == ("pa_triplet", "same", recorded["same"]["optimizer"]["base_lr"])
    assert (cpu["objective"], cpu["optimizer"]["base_lr"]) == ("fdsl", recorded["fdsl"]["optimizer"]["base_lr"])
    for arm, chosen in params["tune"]["arms"].items():  # round 2 starts from round 1's recipe
        if arm.endswith("_wide"):
            assert {key: value for key, value in chosen["pretrain"].items() if key != "model"} == recorded[chosen["method"]], arm


@pytest.mark.parametrize("path", RECIPE_FILES, ids=lambda path: path.name)
def test_every_recorded_recipe_is_a_pretraining_and_an_arm_of_a_study_file(params, path):
    studies = [yaml.safe_load(study.read_text()) for study in (ROOT / "conf/studies").glob("fair_*.yml")]
    named = {arm.get("study.recipe") for study in studies if study.get("recipes") == f"conf/fair/{path.name}" for arm in study["arms"].values()}
    for method, recorded in yaml.safe_load(path.read_text()).items():
        parse_pretrain_params(with_overlay(params["pretrain"], recorded) | {"run_dir": "unused"})  # ConfigError for a wrong key or value
        assert method in named, f"{path.name}: no study file measures {method}"


@pytest.mark.parametrize("study", ["finetune_rates", "fair_finetuned_per_start", "fair_finetuned_converged", "finetune_length"])
def test_the_studies_paper_construction_is_the_tune_arm_pa_explicit_on_round_twos_same_recipe(params, study):
    """The studies' explicit arms: round 2's `same` recipe with the construction keys of the tune arm pa_explicit."""
    arms = yaml.safe_load((ROOT / "conf/studies" / f"{study}.yml").read_text())["arms"]
    construction = params["tune"]["arms"]["pa_explicit"]["pretrain"]
    for name, arm in ((name, arm) for name, arm in arms.items() if name.startswith("explicit") and arm["study.recipe"] != "pa_explicit"):
        assert arm["study.recipe"] == "same", name
        keys = {key: value for key, value in arm.items() if key.startswith("pretrain.")}
        assert keys == {
            "pretrain.pa_triplet.mode": construction["pa_triplet"]["mode"],
            "pretrain.pa_triplet.min_relative_gap": construction["pa_triplet"]["min_relative_gap"],
            "pretrain.data.triplets_per_batch": construction["data"]["triplets_per_batch"],
        }, name
    same = yaml.safe_load((ROOT / "conf/fair/tuned_recipes_round2.yml").read_text())["same"]
    assert (same["pa_triplet"]["normalize_embeddings"], same["model"]["embedding_dim"]) == (
        construction["pa_triplet"]["normalize_embeddings"], construction["model"]["embedding_dim"])


def test_the_paper_constructions_tuned_recipe_is_its_tune_arm_at_values_of_its_space(params):
    """pa_explicit's recorded recipe: the tune arm's construction keys, and the tuned keys at values inside its space."""
    recorded = yaml.safe_load((ROOT / "conf/fair/tuned_recipes_round2.yml").read_text())["pa_explicit"]
    config = parse_tune_params(params["tune"] | {"arm": "pa_explicit"})
    tuned = {}
    for parameter in config.parameters:
        section, key = parameter.key.removeprefix("pretrain.").split(".")
        value = tuned[f"{section}.{key}"] = recorded[section][key]
        assert value in parameter.choices if parameter.choices is not None else parameter.low <= value <= parameter.high, parameter.key
    construction = with_overlay(params["tune"]["arms"]["pa_explicit"]["pretrain"], tuned)
    assert recorded == construction
    studies = [yaml.safe_load((ROOT / "conf/studies" / f"{name}.yml").read_text()) for name in ("finetune_rates", "fair_finetuned_per_start", "fair_finetuned_converged", "finetune_length", "faithful_finetuned_per_start")]
    for study in studies:  # measured at its own recipe, with nothing laid over its pre-training
        arms = [arm for arm in study["arms"].values() if arm.get("study.recipe") == "pa_explicit"]
        assert arms and all(not key.startswith("pretrain.") for arm in arms for key in arm), study["title"]


def test_faithful_is_conf_fair_on_its_own_generator_with_studies_of_its_own(params):
    """conf/faithful: conf/fair's every parameter but the generator's choices, validated on held-out classes, tuned afresh."""
    faithful = env_parameters(str(ROOT / "conf"), "faithful")
    for section in ("pretrain", "retrieval", "classification"):
        assert faithful[section] == params[section], section
    assert {**faithful["tune"], "storage_dir": None} == {**params["tune"], "storage_dir": None}
    assert faithful["tune"]["storage_dir"] != params["tune"]["storage_dir"]  # a conf/fair study never counts here
    generator = ("perturbation", "class_filter", "sampler", "sigma_factor", "uniform")
    assert {key: value for key, value in faithful["fractals"].items() if key not in generator} == {
        key: value for key, value in params["fractals"].items() if key not in generator
    }
    assert faithful["fractals"] != params["fractals"] and faithful["validate_descriptor"]["rows"] == "heldout_classes"


def test_the_converged_verdict_is_the_per_start_verdict_fine_tuned_longer():
    """fair_finetuned_converged: fair_finetuned_per_start's arms (recipes, rates) and seeds, at 1,552 steps, no frozen probe."""
    short, converged = (yaml.safe_load((ROOT / "conf/studies" / f"{name}.yml").read_text()) for name in ("fair_finetuned_per_start", "fair_finetuned_converged"))
    assert converged["arms"] | {"scratch": None} == short["arms"] | {"scratch": None}
    assert converged["arms"]["scratch"] == {**short["arms"]["scratch"], "study.steps": ["finetune"]}
    assert {key: sorted(map(str, values)) for key, values in converged["seeds"].items()} == {
        key: sorted(map(str, values)) for key, values in short["seeds"].items()}
    assert (converged["recipes"], converged["env"]) == (short["recipes"], short["env"])
    assert converged["overlay"] == {**short["overlay"], "retrieval.train.max_steps": 1552}
    assert converged["steps"] == [step for step in short["steps"] if step != "frozen_probe"]
