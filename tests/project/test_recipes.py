"""Every environment runs the recipe it documents: ``conf/<env>/recipe.yml`` against the effective parameters.

Each environment's parameters are built as ``kedro run`` merges them (``conf/base``, then ``conf/<env>``),
every training step is planned at the world size its recipe gives (``python -m fdsml.plan``'s arithmetic),
and each quantity of the table (steps, epochs, global batch, learning rate, schedule, image size, embedding
dimension, backbone) must be what the step would run. A step the environment trains that its table neither
lists nor names in ``from_base`` fails: a key conf/base sets that the environment does not mean to inherit
is caught here, not by a user after a fine-tune.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from fdsml.plan import PIPELINES, load_parameters, plan_steps

from tests.support import ROOT

CONF = ROOT / "conf"
ENVIRONMENTS = sorted(path.name for path in CONF.iterdir() if path.is_dir() and path.name not in ("local", "studies"))  # studies: no environment


def recipe_of(env: str) -> dict[str, dict[str, Any]]:
    """The environment's table, with the steps it names in ``from_base`` taken from conf/base's."""
    table = yaml.safe_load((CONF / env / "recipe.yml").read_text())
    inherited = table.pop("from_base", [])
    base = yaml.safe_load((CONF / "base" / "recipe.yml").read_text())
    return table | {step: base[step] for step in inherited}


def _network(parameters: dict[str, Any], step: str) -> dict[str, Any]:
    """The network side of a step's recipe: backbone, input size and embedding dimension, as the parameters set them."""
    pipeline = step.split("/")[0]
    section = parameters[pipeline]
    if pipeline == "pretrain":
        model = section["model"]
        size = model["img_size"] or parameters["fractals"]["render"]["size"]
        return {"backbone": model["backbone"], "image_size": size, "embedding_dim": model["embedding_dim"]}
    starts = section["starts"] if pipeline == "retrieval" else section["starting_points"]
    backbones = sorted({start["backbone"] for start in starts})
    if pipeline == "retrieval":
        return {"backbone": "/".join(backbones), "image_size": section["data"]["image_size"], "embedding_dim": section["embedding"]["embedding_dim"]}
    return {"backbone": "/".join(backbones), "image_size": section["image_size"]}


def effective_recipe(parameters: dict[str, Any], step: str, world_size: int) -> dict[str, Any]:
    """What ``step`` runs at ``world_size`` replicas with ``parameters``, in the recipe table's terms."""
    plans = {plan.step: plan for plan in plan_steps(parameters, (step.split("/")[0],), world_size)}
    plan = plans[step]
    return {
        "world_size": world_size,
        **_network(parameters, step),
        "global_batch": plan.global_batch,
        "epochs": plan.epochs,
        "total_steps": plan.total_steps,
        "learning_rate": pytest.approx(plan.learning_rate, rel=5e-4),
        "schedule": plan.schedule,
        "warmup_steps": plan.warmup_steps,
    }


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_environment_runs_the_recipe_it_documents(env):
    parameters = load_parameters(env, [], CONF)
    recipe = recipe_of(env)
    trained = {plan.step for plan in plan_steps(parameters, PIPELINES, 1)}
    assert trained == set(recipe), f"conf/{env}/recipe.yml lists {sorted(recipe)}, the environment trains {sorted(trained)}"
    for step, expected in recipe.items():
        assert effective_recipe(parameters, step, expected["world_size"]) == expected, f"conf/{env}: {step}"


def test_an_inherited_step_cap_is_caught():
    """conf/paper once inherited conf/base's retrieval.train.max_steps: 120, so 80 epochs ran 2."""
    parameters = load_parameters("paper", ["retrieval.train.max_steps=120"], CONF)
    found = effective_recipe(parameters, "retrieval/cub", 2)
    assert (found["epochs"], found["total_steps"]) == (4, 120) != (recipe_of("paper")["retrieval/cub"]["epochs"], 2560)


def test_the_published_recipe_is_the_methods():
    """The quantities docs/method.md §4 and §7 give, read from the table itself: 134 epochs of ResNet-50 at 224 px with a 512-d
    embedding and SGD at base 0.1 per 256 images (0.797 at 2,040); retrieval 80 epochs at Adam 1e-4, 512-d."""
    paper = recipe_of("paper")
    pretrain, retrieval = paper["pretrain"], paper["retrieval/cub"]
    assert (pretrain["backbone"], pretrain["image_size"], pretrain["embedding_dim"], pretrain["epochs"]) == ("resnet50", 224, 512, 134)
    assert pretrain["learning_rate"] == pytest.approx(0.1 * pretrain["global_batch"] / 256)
    assert (retrieval["epochs"], retrieval["learning_rate"], retrieval["embedding_dim"], retrieval["image_size"]) == (80, 1e-4, 512, 224)
    assert all(row["epochs"] == 300 and row["image_size"] == 224 for step, row in paper.items() if step.startswith("classification/"))
