"""A study file's GPU-hours before it runs: each unit's training steps priced at a throughput per GPU, a shared
pre-training once, a float32 trunk at its own speed; ``python -m fdsml.plan --study`` prints them for 1 and 8 GPUs."""

import pytest

from fdsml.config import ConfigError, env_parameters
from fdsml.plan import main
from fdsml.training.training_plan import GpuThroughput
from fdsml.tuning.study_cost import unit_costs
from fdsml.tuning.study_file import read_study
from fdsml.tuning.study_runner import parse_study_settings
from tests.tuning.study_files import TINY_STUDY, study_project

PRICED = {  # 3 pre-training steps of 2 x 3 images, 2 fine-tuning steps of 8 images, all at 32 px
    **TINY_STUDY,
    "overlay": {
        **TINY_STUDY["overlay"],
        "pretrain.train.max_steps": 3,
        "pretrain.data.classes_per_batch": 2,
        "pretrain.data.instances_per_class": 3,
    },
    "arms": {
        "fdsl": {"pretrain.objective": "fdsl"},  # declares bf16 in its trunk
        "pa": {"pretrain.objective": "pa_triplet", "pretrain.pa_triplet.filter": "all"},  # keeps float32
        "scratch": {"study.steps": ["frozen_probe", "finetune"]},
    },
    "seeds": {"pretrain.train.seed": [0], "retrieval.seeds": [[0], [1]]},
    "table": {"metrics": ["finetuned.recall@1"]},
}
THROUGHPUT = GpuThroughput(reference_size=32, images_per_second={"resnet18": 100.0}, float32_ratio=0.5)


@pytest.fixture
def project(tmp_path):
    return study_project(tmp_path / "project", PRICED, "priced")


def test_each_unit_is_priced_by_its_images_over_the_throughput_of_its_precision_and_a_shared_pretraining_once(project):
    settings = parse_study_settings({"name": "priced", "conf_source": str(project / "conf")})
    study = read_study(project / "conf/studies/priced.yml")
    costs = {cost.name.split("|")[0] + ("/2" if "[1]" in cost.name else ""): cost for cost in unit_costs(study, settings, env_parameters(str(project / "conf"), "base"), THROUGHPUT)}
    finetune = 2 * 8 / 100  # retrieval's proxy loss computes its trunk in bf16 on every device: the mixed-precision rate
    assert costs["fdsl"].pretrain_s == pytest.approx(3 * 6 / 100) and costs["fdsl"].finetune_s == pytest.approx(finetune)
    assert costs["fdsl/2"].pretrain_s == 0.0  # the second fine-tuning seed finds the pre-training trained
    assert costs["pa"].pretrain_s == pytest.approx(3 * 6 / (100 * 0.5))  # PA-Triplet's float32 trunk at half the speed
    assert costs["scratch"].pretrain_s == 0.0 and costs["scratch/2"].finetune_s == pytest.approx(finetune)


def test_a_backbone_without_a_throughput_is_named_with_the_fix():
    with pytest.raises(ConfigError, match=r"no figure for resnet50 .*benchmarks/gpu_check.py measures it"):
        THROUGHPUT.rate("resnet50", 224)
    assert THROUGHPUT.rate("resnet18", 64) == pytest.approx(25.0) and THROUGHPUT.rate("resnet18", 64, bf16=False) == pytest.approx(12.5)


def test_the_plan_prints_the_studys_gpu_hours_on_one_gpu_and_on_eight(project, capsys):
    assert main(["--study", "priced", "--conf-source", str(project / "conf")]) == 0
    printed = capsys.readouterr().out
    assert "6 units:" in printed and "  1 GPU: at least" in printed and "  8 GPUs: at least" in printed
    assert "study.jobs=8 study.devices=[0,1,2,3,4,5,6,7]" in printed
    assert main(["--study", "no_such_study", "--conf-source", str(project / "conf")]) == 2


def test_a_named_fine_tuning_and_a_classification_are_priced_at_their_own_steps(tmp_path):
    study = {
        **PRICED,
        "steps": ["finetune", "converged"],
        "named_steps": {"converged": {"step": "finetune", "overlay": {"retrieval.train.max_steps": 4}}},
        "arms": {"scratch": {}, "classified": {"study.steps": ["classify"], "classification.train.max_steps": 5, "classification.image_size": 16}},
        "seeds": {"pretrain.train.seed": [0], "retrieval.seeds": [[0]]},
    }
    project = study_project(tmp_path / "project", study, "named")
    settings = parse_study_settings({"name": "named", "conf_source": str(project / "conf")})
    scratch, classified = unit_costs(read_study(project / "conf/studies/named.yml"), settings, env_parameters(str(project / "conf"), "base"), THROUGHPUT)
    assert scratch.finetune_s == pytest.approx((2 + 4) * 8 / 100)  # 388 steps and converged's own, summed
    # 5 steps of 16 images at 16 px, a quarter of the reference's pixels: 400 images a second
    assert classified.finetune_s == pytest.approx(5 * 16 / 400) and classified.pretrain_s == 0.0


def test_the_hours_on_one_gpu_and_on_several_by_hand():
    from fdsml.tuning.study_cost import UnitCost, format_cost

    costs = [UnitCost("a", 7200.0, 3600.0), UnitCost("b", 0.0, 1800.0)]  # 3.5 GPU-hours, the longest unit 3 h
    printed = format_cost(costs, THROUGHPUT, gpus=(1, 2), title="study x").splitlines()
    assert printed[:4] == [
        "study x",
        "2 units: 3.5 GPU-hours (pre-training 2.0, fine-tuning 1.5); the longest unit 3.0 h",
        "  1 GPU: at least 3.5 hours (one unit at a time)",
        "  2 GPUs: at least 3.0 hours (study.jobs=2 study.devices=[0,1])",  # 1.75 h a GPU, but unit a alone takes 3
    ]
    assert printed[4] == "throughput: resnet18 100 img/s at 32 px, scaled by pixels; source not given"
    assert format_cost([UnitCost("c", 180.0, 0.0)], THROUGHPUT, gpus=(1,)).splitlines()[:2] == [  # 0.05 h: 0.1, not 0.0
        "1 units: 0.1 GPU-hours (pre-training 0.1, fine-tuning 0.0); the longest unit 0.1 h", "  1 GPU: at least 0.1 hours (one unit at a time)"]
    assert "(pre-training 0.0, fine-tuning 0.1)" in format_cost([UnitCost("d", 0.0, 180.0)], THROUGHPUT)
    assert format_cost([], THROUGHPUT, gpus=(8,)).splitlines()[:2] == ["0 units: 0.0 GPU-hours (pre-training 0.0, fine-tuning 0.0); the longest unit 0.0 h", "  8 GPUs: at least 0.0 hours (study.jobs=8 study.devices=[0,1,2,3,4,5,6,7])"]
