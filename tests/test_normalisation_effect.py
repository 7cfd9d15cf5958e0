"""benchmarks/normalisation_effect.py (docs/real-data.md): its arguments, and that its 'before' arm really pre-trains on
pixels / 255 while its probe and fine-tuning feed the same weights ImageNet-normalised images, and 'after' one normalisation."""

from pathlib import Path

import pytest
import torch
from kedro.config import OmegaConfigLoader

from fdsml.models import model_payload
from fdsml.models.normalisation import IMAGENET_MEAN, IMAGENET_STD, Normalise
from fdsml.training.pretrain import build_pretrain_model, parse_pretrain_params

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def benchmark(monkeypatch):
    return load_benchmark("normalisation_effect", monkeypatch)


def test_arguments_default_to_both_arms_and_three_seeds_and_refuse_bad_values(benchmark):
    args = benchmark.parse_args([])
    assert args.arms == ["before", "after"] and args.seeds == [0, 1, 2] and args.finetune_steps is None
    assert benchmark.parse_args(["--arms", "after", "--seeds", "4", "--finetune-steps", "10"]).finetune_steps == 10
    assert benchmark.arm("scratch").pretrain is None and benchmark.arm("scratch").consumers == (IMAGENET_MEAN, IMAGENET_STD)
    for bad in (["--arms", "during"], ["--finetune-steps", "-1"], ["--finetune-freeze-steps", "-2"]):
        with pytest.raises(SystemExit):
            benchmark.parse_args(bad)


def _pretrained_payload(benchmark, name: str, tmp_path: Path) -> dict:
    base = OmegaConfigLoader(str(ROOT / "conf"), base_env="base", default_run_env="base")["parameters"]["pretrain"]
    config = parse_pretrain_params(benchmark.pretrain_params(base, benchmark.arm(name), 3, tmp_path))
    assert config.train.seed == 3 and config.validation.probe is None
    return model_payload(build_pretrain_model(config, 8, 64))


def test_before_pretrains_on_pixels_and_its_consumers_normalise_the_same_weights_as_imagenet(benchmark, tmp_path):
    before = benchmark.arm("before")
    payload = _pretrained_payload(benchmark, "before", tmp_path)
    assert payload["model"]["input_mean"] == [0.0] * 3 and payload["model"]["input_std"] == [1.0] * 3
    consumed = benchmark.consumer_payload(payload, before)
    assert consumed["state_dict"] is payload["state_dict"]
    assert consumed["model"]["input_mean"] == list(IMAGENET_MEAN) and consumed["model"]["input_std"] == list(IMAGENET_STD)
    assert payload["model"]["input_mean"] == [0.0] * 3  # the pre-trained model file itself is unchanged


def test_after_uses_the_recorded_normalisation_everywhere(benchmark, tmp_path):
    payload = _pretrained_payload(benchmark, "after", tmp_path)
    assert payload["model"]["input_mean"] == list(IMAGENET_MEAN)
    assert benchmark.consumer_payload(payload, benchmark.arm("after")) is payload


def test_the_trunk_input_check_fails_when_a_phase_normalises_otherwise_than_declared(benchmark):
    layer, images = Normalise(IMAGENET_MEAN, IMAGENET_STD, 3), torch.rand(4, 3, 8, 8)
    seen = benchmark.TrunkInputs()
    with seen.phase("probe", (IMAGENET_MEAN, IMAGENET_STD)):
        layer(images)
    seen.check()
    assert seen.phases["probe"]["batches"] == 1 and seen.phases["probe"]["trunk_min"] < 0
    with seen.phase("pre-training", ((0.0,), (1.0,))):
        layer(images)
    with pytest.raises(AssertionError, match="pre-training"):
        seen.check()


def _result(arm: str, seed: int, recall: float) -> dict:
    measures = {m: recall for m in ("recall@1", "recall@2", "recall@4", "recall@8", "map@r", "r_precision", "nmi")}
    probe = {"initialisation": measures, "end": measures} if arm != "scratch" else None
    result = {"definition": {"arm": arm, "seed": seed}, "finetuned": measures, "trunk_inputs": {}, "seconds": {"finetune_s": 60.0}}
    return result | ({"probe": probe, "heldout_fractal_recall@1": 0.9} if probe else {})


def test_the_table_pairs_after_with_before_seed_by_seed_and_leaves_scratch_without_a_probe(benchmark):
    results = [_result("before", 0, 0.20), _result("before", 1, 0.30), _result("after", 0, 0.25), _result("after", 1, 0.31)]
    table = benchmark.summarise([*results, _result("after", 2, 0.9), _result("scratch", 0, 0.1)]).splitlines()
    assert table[0] == "| | before | after | scratch | after - before, same seed |"
    assert table[2] == "| seeds | 0 1 | 0 1 2 | 0 | 0 1 |"
    tuned = next(line for line in table if line.startswith("| fine-tuned recall@1 |"))
    assert tuned.endswith("| 10.0 | 3.0 ± 2.8 |")  # scratch 10.0; after - before: +5 and +1 points, not the unpaired means
    assert next(line for line in table if line.startswith("| frozen probe recall@1, end")).split("|")[4].strip() == ""


def test_a_runs_key_is_its_definition(benchmark):
    base = benchmark.run_fingerprints(["before", "scratch"], [0, 1], None, None)
    assert list(base) == ["before_seed0", "before_seed1", "scratch_seed0", "scratch_seed1"] and len(set(base.values())) == 4
    assert benchmark.run_fingerprints(["before"], [1], None, None) == {"before_seed1": base["before_seed1"]}
    assert benchmark.run_fingerprints(["before"], [1], 10, None)["before_seed1"] != base["before_seed1"]


@pytest.mark.slow
def test_a_second_invocation_reruns_nothing_and_writes_the_same_table(benchmark, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(ROOT)
    argv = ["--arms", "scratch", "--seeds", "0", "--finetune-steps", "1", "--finetune-freeze-steps", "0", "--out", str(tmp_path), "--storage", str(tmp_path / "runs.log")]
    caplog.set_level("INFO")
    benchmark.main(argv)
    table = (tmp_path / "normalisation_effect.md").read_text()
    assert "| seeds | 0 |" in table and "* scratch seed 0: fine-tuning" in table
    assert "scratch seed 0: recall@1" in caplog.text
    caplog.clear()
    (tmp_path / "normalisation_effect.md").unlink()
    benchmark.main(argv)
    assert "scratch seed 0: recall@1" not in caplog.text
    assert (tmp_path / "normalisation_effect.md").read_text() == table
