"""The precision a run trains in: bf16 where the device computes it natively (CUDA, a CPU with AVX512-BF16 or
AMX), in the parts the objective declares, the same on every device; float32 elsewhere or with ``train.amp: false``;
said first, recorded in the checkpoint, never mixed on resume, and reproducible from the seed."""

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from fdsml import distributed
from fdsml.config import ConfigError
from fdsml import native_bf16 as capability
from fdsml.losses.pair import build_pair_loss
from fdsml.training.loop import train
from fdsml.losses.couce import CouCESettings, build_couce_objective
from fdsml.losses.proxy import build_proxy_loss
from fdsml.training.objectives import CrossEntropyObjective, ProxyObjective
from fdsml.training.finetune import finetune
from fdsml.training.retrieval import fine_tuning, finetune_run, load_splits, parse_retrieval_params
from fdsml.training.pretrain_objectives.label_triplet import LabelTripletObjective
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective
from fdsml.training.pretrain_objectives.pml import PairLossObjective
from fdsml.training.loop_config import LoopConfig
from fdsml.native_bf16 import cpu_flags
from fdsml.training.precision import Precision, precision
from fdsml.training.resume import precision_refusal
from fdsml.training.pretrain import build_objective
from fdsml.training.pretrain import build_batch_sampler, build_fractal_dataset, build_pretrain_model, plan_pretrain, pretrain

from tests.support import TINY_RETRIEVAL, TINY_SPEC
from .helpers import killed_after_checkpoint, tiny_config

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
BF16, FLOAT32 = Precision(torch.bfloat16, torch.bfloat16), Precision()
BF16_TRUNK = Precision(torch.bfloat16, torch.float32)
AMP, NO_AMP = LoopConfig(amp=True), LoopConfig(amp=False)
CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 avx512f {extra}\nbogomips\t: 4800\n\nprocessor\t: 1\n"


@pytest.fixture
def cpuinfo(tmp_path, monkeypatch):
    """Point the capability check at a ``/proc/cpuinfo`` whose flags line ends with ``extra``."""

    def write(extra: str) -> None:
        path = tmp_path / "cpuinfo"
        path.write_text(CPUINFO.format(extra=extra))
        monkeypatch.setattr(capability, "CPUINFO", path)
        capability.cpu_has_native_bf16.cache_clear()

    yield write
    capability.cpu_has_native_bf16.cache_clear()


@pytest.fixture
def native_bf16(monkeypatch):
    """Whether the CPU counts as computing bf16 natively (torch's CPU autocast runs bf16 either way)."""
    return lambda native: monkeypatch.setattr(capability, "cpu_has_native_bf16", lambda: native)


def test_cpu_flags_are_read_from_the_flags_line():
    assert cpu_flags(CPUINFO.format(extra="avx512_bf16")) == {"fpu", "sse2", "avx2", "avx512f", "avx512_bf16"}
    assert cpu_flags("processor\t: 0\n") == frozenset()


@pytest.mark.parametrize(
    "flags, loop, expected",
    [
        ("avx512_bf16", AMP, BF16),
        ("amx_bf16 amx_tile", AMP, BF16),
        ("avx512_bf16", NO_AMP, FLOAT32),  # amp false forces float32
        ("avx512_vnni", AMP, FLOAT32),  # AVX-512 without its bf16 extension emulates bf16: float32
        ("", AMP, FLOAT32),
    ],
)
def test_a_cpu_trains_in_bf16_only_when_its_flags_say_it_computes_bf16(cpuinfo, flags, loop, expected):
    cpuinfo(flags)
    assert precision(loop, CPU) == expected


def test_cuda_trains_in_bf16_with_amp_whatever_the_cpu(cpuinfo):
    cpuinfo("")
    assert precision(AMP, CUDA) == BF16 and precision(NO_AMP, CUDA) == FLOAT32


def test_a_machine_without_cpuinfo_trains_in_float32(tmp_path, monkeypatch):
    monkeypatch.setattr(capability, "CPUINFO", tmp_path / "absent")
    capability.cpu_has_native_bf16.cache_clear()
    try:
        assert precision(AMP, CPU) == FLOAT32
    finally:
        capability.cpu_has_native_bf16.cache_clear()


@pytest.mark.parametrize("device", [CPU, CUDA])
def test_an_objective_declares_its_bf16_parts_and_every_device_follows_them(cpuinfo, device):
    cpuinfo("avx512_bf16")
    for objective in (PATripletObjective("same"), LabelTripletObjective(), PairLossObjective(build_pair_loss("contrastive"))):
        assert precision(AMP, device, objective) == FLOAT32  # margins on embedding distances: float32 (docs/cpu.md)
    assert precision(AMP, device, CrossEntropyObjective()) == BF16  # declares nothing: trunk and head
    proxies = build_proxy_loss("proxy_anchor", 3, 8)
    for objective in (ProxyObjective(proxies), build_couce_objective(CouCESettings(), "proxy_anchor", 3, 8)):
        assert precision(AMP, device, objective) == BF16_TRUNK  # retrieval: the trunk in bf16, the head in float32


@pytest.mark.parametrize(
    "parts, expected",
    [((), FLOAT32), (("trunk",), Precision(torch.bfloat16, torch.float32)), (("head", "trunk"), BF16)],
)
def test_train_bf16_parts_overrides_the_objectives_declaration(cpuinfo, parts, expected):
    cpuinfo("avx512_bf16")
    loop = LoopConfig(amp=True, bf16_parts=parts)
    assert precision(loop, CPU, PATripletObjective("same")) == precision(loop, CUDA, CrossEntropyObjective()) == expected
    assert precision(LoopConfig(amp=False, bf16_parts=parts), CPU) == FLOAT32
    assert str(expected).endswith(", loss float32")


@pytest.mark.parametrize("parts, message", [(["head"], "a head in bf16 needs its trunk in bf16"), (["loss"], "unknown part")])
def test_bf16_parts_refuses_a_head_without_its_trunk_and_unknown_parts(parts, message):
    with pytest.raises(ConfigError, match=f"bf16_parts: {message}"):
        LoopConfig(bf16_parts=parts)


@pytest.mark.parametrize(
    "native, objective, said",
    [
        (True, "fdsl", "trunk bfloat16, head bfloat16"),
        (False, "fdsl", "trunk float32, head float32"),
        (True, "pa_triplet", "trunk float32, head float32"),
    ],
)
def test_the_first_line_says_the_precision(tiny_table, tmp_path, caplog, native_bf16, native, objective, said):
    native_bf16(native)
    with caplog.at_level(logging.INFO, logger="fdsml.training.loop"):
        pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path, objective=objective, train={"max_steps": 1}))
    first = next(record.getMessage() for record in caplog.records if record.name == "fdsml.training.loop")
    assert first.startswith(f"Training on cpu ({said}, loss float32), world size 1")


def test_the_same_seed_gives_the_same_weights_in_bf16_and_bf16_differs_from_float32(tiny_table, tmp_path, native_bf16):
    native_bf16(True)
    steps = {"max_steps": 3, "checkpoint_every": 100}
    first, _ = pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path / "a", objective="fdsl", train=steps))
    again, _ = pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path / "b", objective="fdsl", train=steps))
    in_float32, _ = pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path / "c", objective="fdsl", train=steps | {"amp": False}))
    for name, tensor in first["state_dict"].items():
        torch.testing.assert_close(again["state_dict"][name], tensor, rtol=0, atol=0, msg=name)
    weight = "backbone.conv1.weight"  # FDSL (cross-entropy) takes bf16 on the CPU
    assert not torch.equal(first["state_dict"][weight], in_float32["state_dict"][weight])  # autocast did act


def _train(tiny_table, config, checkpoint):
    """The loop on the tiny table at a fixed ``checkpoint`` path and no fingerprint: only what the checkpoint records decides."""
    context = distributed.setup("cpu")
    plan = plan_pretrain(config, len(tiny_table), 1).check()
    dataset = build_fractal_dataset(tiny_table, TINY_SPEC, config, None)
    sampler = build_batch_sampler(dataset.labels, config, context, plan)
    model = build_pretrain_model(config, 3, TINY_SPEC.size)
    return train(model, build_objective(config, 3, model.output_dim), dataset, sampler, config.train, config.optimizer, checkpoint, plan=plan)


def test_a_bf16_run_resumed_from_its_checkpoint_ends_on_the_uninterrupted_runs_weights(tiny_table, tmp_path, native_bf16, caplog):
    """FDSL in bf16 (trunk and head), 6 steps straight against 3 steps, then a run of 6 that resumes at step 3."""
    native_bf16(True)

    def steps(count: int, folder: str):
        torch.manual_seed(0)  # the initial model _train builds
        config = tiny_config(tmp_path, objective="fdsl", train={"max_steps": count, "checkpoint_every": 3})
        return _train(tiny_table, config, tmp_path / folder / "last.pt")

    straight = steps(6, "straight").model.state_dict()
    steps(3, "resumed")
    with caplog.at_level(logging.INFO, logger="fdsml.training.loop"):
        resumed = steps(6, "resumed")
    assert any("at step 3 of 6" in record.getMessage() for record in caplog.records)  # it did resume
    assert torch.load(tmp_path / "resumed" / "last.pt", weights_only=True)["precision"] == str(BF16)
    for name, tensor in straight.items():
        torch.testing.assert_close(resumed.model.state_dict()[name], tensor, rtol=0, atol=0, msg=name)


def _fine_tune(run_dir, **train) -> dict:
    """The weights of a 4-step retrieval fine-tuning of the tiny set's scratch start, its run folder under ``run_dir``
    (as retrieval names it, fixed by dataset, start and seed; what defines the run is in its fingerprint)."""
    train = {"max_steps": 4, "checkpoint_every": 2, "freeze_backbone_steps": 1, "device": "cpu"} | train
    data = TINY_RETRIEVAL["data"] | {"batch_size": 16}
    config = parse_retrieval_params(TINY_RETRIEVAL | {"data": data, "train": train, "run_dir": str(run_dir)})
    splits = load_splits(config)
    task = fine_tuning(config, int(splits.train.labels.max()) + 1)
    return finetune(task, splits.train, finetune_run(splits.name, config.starts[0], 0))[0].model.state_dict()


def test_a_killed_bf16_retrieval_fine_tuning_resumes_to_the_uninterrupted_runs_weights(tmp_path, native_bf16, monkeypatch, caplog):
    """Retrieval's recipe as the kill soak runs it (AdamW, proxies at 100x, the trunk frozen for the first step), in its
    declared precision, at 16 px: ResNet-18's layer4.0.conv1 sees a 1 x 1 map there, the convolution whose bf16 weight
    gradient oneDNN leaves uninitialised (Float32WhereCpuBf16Fails); without that guard two runs differ in it."""
    native_bf16(True)
    with killed_after_checkpoint(monkeypatch, 2), pytest.raises(KeyboardInterrupt):
        _fine_tune(tmp_path / "resumed")
    with caplog.at_level(logging.INFO, logger="fdsml.training.loop"):
        resumed = _fine_tune(tmp_path / "resumed")
    assert any("at step 2 of 4" in record.getMessage() for record in caplog.records)  # it did resume
    straight = _fine_tune(tmp_path / "straight")
    assert torch.load(next((tmp_path / "resumed").rglob("last.pt")), weights_only=True)["precision"] == str(BF16_TRUNK)
    for name, tensor in straight.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0, msg=name)


def test_a_finished_fine_tuning_of_another_precision_is_another_configuration_and_starts_over(tmp_path, native_bf16, caplog):
    """A run's fingerprint holds the precision it resolves to: a retrieval run (its folder fixed by dataset, start
    and seed) whose precision changed, by its settings or by an objective's declaration after an upgrade, starts
    over as any other change of configuration does, where a refusal would stop `dvc repro` for good."""
    native_bf16(True)
    _fine_tune(tmp_path, amp=False)
    with caplog.at_level(logging.INFO):
        _fine_tune(tmp_path, amp=True)
    assert "belongs to another configuration: starting over instead of resuming" in caplog.text
    assert "Trained steps 1-4 of 4" in caplog.text
    assert torch.load(next(tmp_path.rglob("last.pt")), weights_only=True)["precision"] == str(BF16_TRUNK)


@pytest.mark.parametrize("first_amp, then_amp", [(False, True), (True, False)])
def test_the_checkpoint_records_its_precision_and_resume_refuses_another(tiny_table, tmp_path, native_bf16, first_amp, then_amp):
    native_bf16(True)
    checkpoint = tmp_path / "run" / "last.pt"
    _train(tiny_table, tiny_config(tmp_path, objective="fdsl", train={"max_steps": 2, "amp": first_amp}), checkpoint)
    written_in = torch.load(checkpoint, weights_only=True)["precision"]
    assert written_in == str(BF16 if first_amp else FLOAT32)
    longer = tiny_config(tmp_path, objective="fdsl", train={"max_steps": 4, "amp": then_amp})
    refusal = rf"last.pt: trained in {written_in}, .*pretrain.train.amp: {str(then_amp).lower()}, bf16_parts: null\); .*Set pretrain.train.amp: {str(first_amp).lower()}"
    with pytest.raises(ConfigError, match=refusal):
        _train(tiny_table, longer, checkpoint)
    assert torch.load(checkpoint, weights_only=True)["step"] == 2  # untouched
    resumed = _train(tiny_table, tiny_config(tmp_path, objective="fdsl", train={"max_steps": 4, "amp": first_amp}), checkpoint)
    assert resumed.history["step"].tolist() == [1, 2, 3, 4]


def test_the_precision_refusal_names_both_precisions_the_settings_and_each_fix():
    run = Path("runs/pretrain/last.pt")
    bf16 = str(Precision(torch.bfloat16, torch.bfloat16))
    to_float32 = precision_refusal(run, str(Precision()), bf16, LoopConfig(amp=True, bf16_parts=("trunk", "head")), "pretrain/fdsl")
    assert to_float32 == (
        "runs/pretrain/last.pt: trained in trunk float32, head float32, loss float32, this run computes in trunk bfloat16, "
        "head bfloat16, loss float32 (pretrain.train.amp: true, bf16_parts: [trunk, head]); resuming would mix precisions in "
        "one run. Set pretrain.train.amp: false to continue it, or start over: remove runs/pretrain or set "
        "pretrain.train.resume: false"
    )
    to_bf16 = precision_refusal(run, bf16, str(Precision()), LoopConfig(amp=False), "retrieval")
    assert (
        "(retrieval.train.amp: false, bf16_parts: null); resuming would mix precisions in one run. Set retrieval.train.amp: "
        "true, with retrieval.train.bf16_parts naming its bf16 parts, on a device that computes bf16 natively (CUDA, or a "
        "CPU with AVX512-BF16 or AMX) to continue it, or start over: remove runs/pretrain or set retrieval.train.resume: false"
    ) in to_bf16


RUN_AND_DIGEST = textwrap.dedent(
    """
    import hashlib, json, sys
    import torch
    torch.set_num_threads({threads})
    from fdsml import native_bf16
    native_bf16.cpu_has_native_bf16 = lambda: True  # the bf16 path on any CPU (torch emulates it where it is not native)
    from fdsml.families.finefractaldb import generate_finefractaldb
    from fdsml.training.pretrain import pretrain
    sys.path.insert(0, {tests!r})
    from support import TINY_FRACTALS, TINY_SPEC
    from training.helpers import tiny_config
    table, _ = generate_finefractaldb(TINY_FRACTALS)
    payload, _ = pretrain(table, TINY_SPEC, tiny_config({run_dir!r}, objective={objective!r}, train={train!r}))
    weights = payload["state_dict"]
    print(json.dumps(hashlib.sha256(b"".join(weights[name].numpy().tobytes() for name in sorted(weights))).hexdigest()))
    """
)


def weights_digest(tmp_path: Path, objective: str, amp: bool, threads: int) -> str:
    """The SHA-256 of the weights a fresh process ends on after 4 steps on ``threads`` torch threads."""
    tests = str(Path(__file__).resolve().parents[1])
    run_dir = tmp_path / f"{objective}-{amp}-{threads}-{len(list(tmp_path.iterdir()))}"
    train = {"max_steps": 4, "checkpoint_every": 100, "amp": amp}
    script = RUN_AND_DIGEST.format(threads=threads, tests=tests, run_dir=str(run_dir), objective=objective, train=train)
    done = subprocess.run([sys.executable, "-c", script], env=os.environ | {"PYTHONPATH": "src"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("objective, amp", [("fdsl", True), ("pa_triplet", True)])
def test_the_same_seed_and_thread_count_give_the_same_bytes_in_another_process(tmp_path, objective, amp):
    """Two fresh processes, one thread each: the same weights to the byte, in bf16 (FDSL's trunk and head) and in float32
    (PA-Triplet's declaration). A thread count of its own sums in another order: docs/reproducibility.md says how much."""
    assert weights_digest(tmp_path, objective, amp, 1) == weights_digest(tmp_path, objective, amp, 1)
