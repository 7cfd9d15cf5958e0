"""conf/cpu, the hour-on-2-CPU-cores pre-training (docs/cpu.md): `--env cpu` selects it over conf/base, it passes
the checks a run makes before its first node, and the pre-training budget study runs at its image size."""


import yaml
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from fdsml.pipelines.run_checks import check_run

from tests.support import ROOT



def _parameters(env: str) -> dict:
    bootstrap_project(ROOT)
    with KedroSession.create(project_path=ROOT, env=env) as session:
        return session.load_context().params


def test_env_cpu_overrides_base_where_it_says_and_keeps_the_rest():
    base, cpu = _parameters("base"), _parameters("cpu")
    assert cpu["fractals"]["render"]["size"] == 48 != base["fractals"]["render"]["size"]
    assert cpu["pretrain"]["train"]["max_steps"] > 0 and base["pretrain"]["train"]["max_steps"] is None
    assert cpu["pretrain"]["objective"] == "fdsl" and cpu["pretrain"]["model"] == base["pretrain"]["model"]
    # the downstream stages' longer CPU recipes (conf/base shortens them so the default chain fits 10 minutes)
    assert (cpu["retrieval"]["train"]["epochs"], cpu["retrieval"]["train"]["max_steps"], cpu["retrieval"]["demo_max_steps"]) == (2, None, None)
    assert base["retrieval"]["demo_max_steps"]["omniglot"] < 2 * 194  # the embedded demonstration's cap
    # each start at the rate its own search chose on training data (conf/base: one rate, stated)
    assert cpu["retrieval"]["rate_search"] and cpu["classification"]["rate_search"] and base["retrieval"]["rate_search"] is None
    assert cpu["retrieval"]["data"] == base["retrieval"]["data"] and cpu["retrieval"]["starts"] == base["retrieval"]["starts"]
    assert cpu["classification"]["train"]["epochs"] > base["classification"]["train"]["epochs"]
    assert cpu["robustness"]["max_images"] > base["robustness"]["max_images"]
    check_run(cpu)


def test_the_budget_study_runs_at_conf_cpus_image_size():
    study = yaml.safe_load((ROOT / "conf/studies/pretraining_budget.yml").read_text())
    size = _parameters("cpu")["fractals"]["render"]["size"]
    assert study["overlay"]["fractals.render.size"] == study["overlay"]["retrieval.data.image_size"] == size
