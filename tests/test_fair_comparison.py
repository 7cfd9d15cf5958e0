"""The fair comparison of the pre-training objectives (benchmarks/fair_comparison.py, conf/fair): one budget for every arm, recipes from the best trials."""

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from fdsml.config import with_overlay
from fdsml.training.pretrain import parse_pretrain_params
from fdsml.tuning import TrialObjective, parse_tune_params
from fdsml.tuning.study import check_study
from fdsml.tuning.space import overlay
from tests.benchmark_scripts import load_benchmark


@pytest.fixture
def fair(monkeypatch):
    return load_benchmark("fair_comparison", monkeypatch)


@pytest.fixture
def params(fair):
    return fair.parameters("fair")


def test_every_arm_shares_the_budget_and_tunes_keys_its_objective_reads(fair, params, monkeypatch):
    budget = load_benchmark("pretraining_budget", monkeypatch)
    settings = params["fair_comparison"]
    assert params["tune"]["validation_dataset"] == "omniglot_validation"
    assert params["pretrain"]["validation"]["probe"]["max_images"] is None  # all 440 validation images
    assert params["fractals"]["render"]["size"] == budget.Study().size  # measured at the size it was tuned at
    for arm, chosen in settings["arms"].items():
        runtime = fair.tune_params(settings, arm, None)
        config = parse_tune_params(params["tune"] | runtime["tune"])  # the shared budget, sampler and pruner; its own space
        assert config.study == f"fair_{arm}" and config.parameters[0].key == "pretrain.optimizer.base_lr"
        assert (config.budget.n_trials, config.sampler.seed, config.pruner.name) == (params["tune"]["budget"]["n_trials"], 0, "median")
        pretrain = with_overlay(params["pretrain"], runtime["pretrain"])
        drawn = {parameter.key: parameter.low if parameter.choices is None else parameter.choices[-1] for parameter in config.parameters}
        tuned = overlay({"pretrain": pretrain}, drawn)["pretrain"]  # ConfigError for a key the configuration lacks
        assert parse_pretrain_params(tuned | {"run_dir": "unused"}).objective == budget.METHOD_OVERRIDES[chosen["method"]]["objective"]
        check_study(TrialObjective(config, {"pretrain": pretrain, "retrieval": params["retrieval"]}, inputs=None))  # every extreme, the baseline


def _study(tmp_path, values):
    tmp_path.mkdir(exist_ok=True)
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'fair_fdsl.db'}", study_name="fair_fdsl", direction="maximize")
    study.set_user_attr("metric", "pretrain.val_probe_recall_at_1")
    space = {"pretrain.optimizer.base_lr": FloatDistribution(0.05, 5.0, log=True), "pretrain.fdsl.label_smoothing": FloatDistribution(0.0, 0.2)}
    for (lr, smoothing), (value, state) in values:
        study.add_trial(
            create_trial(
                params={"pretrain.optimizer.base_lr": lr, "pretrain.fdsl.label_smoothing": smoothing},
                distributions=space,
                value=value if state == TrialState.COMPLETE else None,
                state=state,
                intermediate_values={} if state == TrialState.COMPLETE else {100: value},
            )
        )
    return study


def test_an_arms_recipe_is_its_objective_with_its_best_complete_trial_on_top(fair, params, tmp_path):
    params = params | {"tune": params["tune"] | {"budget": {"n_trials": 3}}}
    study = _study(
        tmp_path,
        [((0.5, 0.0), (0.40, TrialState.COMPLETE)), ((2.0, 0.1), (0.55, TrialState.COMPLETE)), ((1.0, 0.2), (0.90, TrialState.PRUNED))],
    )
    assert fair.recipe(params, "fdsl", study) == {"objective": "fdsl", "optimizer": {"base_lr": 2.0}, "fdsl": {"label_smoothing": 0.1}}
    row = fair.summary_row("fdsl", study)
    assert (row["trials"], row["complete"], row["pruned"], row["of them diverged"], row["best trial"]) == (3, 2, 1, 0, 1)
    assert (row["baseline R@1"], row["best R@1"]) == (0.40, 0.55)
    assert row["best recipe"] == "optimizer.base_lr 2, fdsl.label_smoothing 0.1"  # in the order of the space


def test_an_arm_has_no_recipe_before_its_study_has_its_budget_and_a_complete_trial(fair, params, tmp_path):
    study = _study(tmp_path, [((0.5, 0.0), (0.40, TrialState.COMPLETE)), ((0.7, 0.0), (0.30, TrialState.PRUNED))])
    with pytest.raises(SystemExit, match="has 2 of its 3 trials done; run `fair_comparison.py tune --arms fdsl` first"):
        fair.recipe(params | {"tune": params["tune"] | {"budget": {"n_trials": 3}}}, "fdsl", study)
    assert fair.recipe(params | {"tune": params["tune"] | {"budget": {"n_trials": 2}}}, "fdsl", study)["optimizer"] == {"base_lr": 0.5}
    pruned = _study(tmp_path / "pruned", [((0.5, 0.0), (0.40, TrialState.PRUNED))])
    with pytest.raises(SystemExit, match="has no complete trial"):
        fair.recipe(params | {"tune": params["tune"] | {"budget": {"n_trials": 1}}}, "fdsl", pruned)


def test_the_studies_are_read_from_the_storage_folder_the_workers_share(fair, params, tmp_path):
    _study(tmp_path, [((2.0, 0.1), (0.55, TrialState.COMPLETE))])
    study = fair.arm_study(params, "fdsl", str(tmp_path))
    assert study.study_name == "fair_fdsl" and study.best_value == 0.55


def test_the_seed_study_is_a_grid_of_seeds_and_contrasts_around_the_recipe(fair, params, tmp_path):
    params = params | {"tune": params["tune"] | {"budget": {"n_trials": 1}}}
    study = _study(tmp_path, [((2.0, 0.1), (0.55, TrialState.COMPLETE))])
    vary = {"pretrain.fdsl.label_smoothing": 0.0, "pretrain.fdsl_pa.weight": 0.0}  # the second is not fdsl's
    runtime = fair.seeds_params(params, "fdsl", study, [0, 1, 2], vary, None)
    config = parse_tune_params(params["tune"] | runtime["tune"])
    assert config.study == "fair_fdsl_seeds" and config.sampler.name == "grid" and config.budget.n_trials == 6
    assert [(parameter.key, parameter.choices) for parameter in config.parameters] == [
        ("pretrain.train.seed", (0, 1, 2)),
        ("pretrain.fdsl.label_smoothing", (0.1, 0.0)),
    ]
    assert runtime["pretrain"] == {"objective": "fdsl", "optimizer": {"base_lr": 2.0}, "fdsl": {"label_smoothing": 0.1}}
    assert not config.baseline and config.pruner.name == "none"


def test_the_seed_table_gives_each_settings_mean_and_spread_over_seeds(fair, tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'seeds.db'}", study_name="fair_fdsl_seeds", direction="maximize")
    space = {"pretrain.train.seed": CategoricalDistribution([0, 1]), "pretrain.fdsl.batches": CategoricalDistribution(["shuffled", "class_balanced"])}
    for seed, batches, value in ((1, "shuffled", 0.5), (0, "shuffled", 0.6), (0, "class_balanced", 0.4), (1, "class_balanced", 0.2)):
        study.add_trial(create_trial(params={"pretrain.train.seed": seed, "pretrain.fdsl.batches": batches}, distributions=space, value=value))
    rows = {cells[0]: cells[1:] for cells in ([cell.strip() for cell in line.strip("|").split("|")] for line in fair.seeds_table(study).splitlines())}
    assert rows["shuffled"] == ["0.5500", "0.0707", "2", "0.6000 0.5000"]
    assert rows["class_balanced"] == ["0.3000", "0.1414", "2", "0.4000 0.2000"]


def test_measure_runs_the_budget_study_on_the_recipes_with_every_pretraining_seed(fair, params, tmp_path, monkeypatch):
    params = params | {"tune": params["tune"] | {"budget": {"n_trials": 1}}}
    _study(tmp_path / "studies", [((2.0, 0.1), (0.55, TrialState.COMPLETE))])
    commands = []
    monkeypatch.setattr(fair.subprocess, "run", lambda command, **_: commands.append(command))
    args = fair.argparse.Namespace(steps=None, pretrain_seeds=[0, 1], finetune_seeds=[0], jobs=1, finetune_steps=None, recipes=None)
    fair.measure(params, ["fdsl"], str(tmp_path / "studies"), tmp_path / "out", args)
    (command,) = commands
    budget = load_benchmark("pretraining_budget", monkeypatch)
    parsed = dict(zip(command[2::], command[3::]))
    assert command[command.index("--arms") + 1 : command.index("--pretrain-seeds")] == ["scratch:0", "fdsl:300"]
    assert parsed["--storage"] == f"sqlite:///{(tmp_path / 'out' / 'measure.db').resolve()}"
    assert budget.read_recipes(parsed["--recipes"]) == {"fdsl": fair.recipe(params, "fdsl", fair.arm_study(params, "fdsl", str(tmp_path / "studies")))}
    assert (parsed["--size"], parsed["--points"]) == ("48", "2300")


TUNED_RECIPES = "conf/fair/tuned_recipes.yml"


def test_measure_takes_the_recorded_recipes_without_any_study(fair, params, tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(fair.subprocess, "run", lambda command, **_: commands.append(command))
    args = fair.argparse.Namespace(steps=[5600], pretrain_seeds=[0], finetune_seeds=[0], jobs=1, finetune_steps=None, recipes=TUNED_RECIPES)
    fair.measure(params, ["fdsl_pa", "pa_same"], str(tmp_path / "no_studies"), tmp_path / "out", args)
    (command,) = commands
    parsed = dict(zip(command[2::], command[3::]))
    assert command[command.index("--arms") + 1 : command.index("--pretrain-seeds")] == ["scratch:0", "fdsl_pa:5600", "same:5600"]
    budget = load_benchmark("pretraining_budget", monkeypatch)
    recorded = budget.read_recipes(TUNED_RECIPES)
    assert budget.read_recipes(parsed["--recipes"]) == {"fdsl_pa": recorded["fdsl_pa"], "same": recorded["same"]}
    assert not (tmp_path / "no_studies").exists()


def test_measure_names_the_arm_a_recipes_file_lacks(fair, params, tmp_path, monkeypatch):
    (tmp_path / "recipes.yml").write_text("fdsl: {objective: fdsl}\n")
    monkeypatch.setattr(fair.subprocess, "run", lambda command, **_: pytest.fail("measured without a recipe"))
    args = fair.argparse.Namespace(steps=None, pretrain_seeds=[0], finetune_seeds=[0], jobs=1, finetune_steps=None, recipes=str(tmp_path / "recipes.yml"))
    with pytest.raises(SystemExit, match=r"recipes.yml has no recipe for label_triplet \(method label_triplet\)"):
        fair.measure(params, ["fdsl", "label_triplet"], None, tmp_path / "out", args)


def test_the_defaults_carry_the_recorded_recipes(fair, monkeypatch):
    """conf/base's objective blocks, its default objective's rate and conf/cpu's FDSL are the recipes the studies chose."""
    recorded = load_benchmark("pretraining_budget", monkeypatch).read_recipes(TUNED_RECIPES)
    base, cpu = fair.parameters("base")["pretrain"], fair.parameters("cpu")["pretrain"]
    for method, block in (("fdsl", "fdsl"), ("same", "pa_triplet"), ("fdsl_pa", "fdsl_pa"), ("label_triplet", "label_triplet")):
        assert recorded[method][block].items() <= base[block].items(), method
    assert (base["objective"], base["pa_triplet"]["filter"], base["optimizer"]["base_lr"]) == ("pa_triplet", "same", recorded["same"]["optimizer"]["base_lr"])
    assert (cpu["objective"], cpu["optimizer"]["base_lr"]) == ("fdsl", recorded["fdsl"]["optimizer"]["base_lr"])
    for arm, chosen in fair.parameters("fair")["fair_comparison"]["arms"].items():  # round 2 starts from round 1's recipe
        if arm.endswith("_wide"):
            assert {key: value for key, value in chosen["pretrain"].items() if key != "model"} == recorded[chosen["method"]], arm


@pytest.mark.parametrize("path", [TUNED_RECIPES, "conf/fair/tuned_recipes_round2.yml", "conf/fair/untuned_recipes.yml"])
def test_every_recorded_recipe_is_a_pretraining_of_its_method(fair, params, monkeypatch, path):
    budget = load_benchmark("pretraining_budget", monkeypatch)
    for method, recorded in budget.read_recipes(path).items():
        config = parse_pretrain_params(with_overlay(params["pretrain"], recorded) | {"run_dir": "unused"})  # ConfigError for a wrong key or value
        assert config.objective == budget.METHOD_OVERRIDES[method]["objective"], method


def test_the_untuned_paper_recipe_is_its_arm_at_conf_bases_values(fair, monkeypatch):
    """pa_explicit's recorded recipe: the arm's objective (the paper's construction) with conf/base's rate, margin and reducer."""
    recorded = load_benchmark("pretraining_budget", monkeypatch).read_recipes("conf/fair/untuned_recipes.yml")["explicit_same"]
    arm = fair.parameters("fair")["fair_comparison"]["arms"]["pa_explicit"]
    base = fair.parameters("base")["pretrain"]
    untuned = {"optimizer": {"base_lr": base["optimizer"]["base_lr"]}, "pa_triplet": {key: base["pa_triplet"][key] for key in ("margin", "reducer")}}
    assert recorded == with_overlay(arm["pretrain"], untuned)
    assert (recorded["pa_triplet"]["mode"], recorded["pa_triplet"]["normalize_embeddings"], recorded["model"]["embedding_dim"]) == ("explicit", False, 512)
    assert recorded["pa_triplet"]["min_relative_gap"] == 0.0


def test_faithful_is_conf_fair_on_its_own_generator_with_studies_of_its_own(fair):
    """conf/faithful: conf/fair's every parameter but the generator's choices, validated on held-out classes, tuned afresh."""
    fair_params, faithful = fair.parameters("fair"), fair.parameters("faithful")
    for section in ("pretrain", "retrieval", "fair_comparison", "classification"):
        assert faithful[section] == fair_params[section], section
    assert {**faithful["tune"], "storage_dir": None} == {**fair_params["tune"], "storage_dir": None}
    assert faithful["tune"]["storage_dir"] != fair_params["tune"]["storage_dir"]  # a conf/fair study never counts here
    generator = ("perturbation", "class_filter", "sampler", "sigma_factor", "uniform")
    assert {key: value for key, value in faithful["fractals"].items() if key not in generator} == {
        key: value for key, value in fair_params["fractals"].items() if key not in generator
    }
    assert faithful["fractals"] != fair_params["fractals"] and faithful["validate_descriptor"]["rows"] == "heldout_classes"
