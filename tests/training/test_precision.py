"""The precision a run trains in: bf16 autocast where the device computes bf16 natively (CUDA, a CPU with
AVX512-BF16 or AMX), float32 elsewhere or with ``train.amp: false``; said first, recorded in the checkpoint,
never mixed on resume, and reproducible from the seed."""

import logging

import pytest
import torch

from fdsml import distributed
from fdsml.config import ConfigError
from fdsml.training import precision as precision_module
from fdsml.losses.pair import build_pair_loss
from fdsml.training.loop import train
from fdsml.training.objectives import CrossEntropyObjective
from fdsml.training.pretrain_objectives.label_triplet import LabelTripletObjective
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective
from fdsml.training.pretrain_objectives.pml import PairLossObjective
from fdsml.training.precision import cpu_flags, precision
from fdsml.training.pretrain import build_objective
from fdsml.training.pretrain import build_batch_sampler, build_fractal_dataset, build_pretrain_model, plan_pretrain, pretrain

from tests.support import TINY_SPEC
from .helpers import tiny_config

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 avx512f {extra}\nbogomips\t: 4800\n\nprocessor\t: 1\n"


@pytest.fixture
def cpuinfo(tmp_path, monkeypatch):
    """Point the capability check at a ``/proc/cpuinfo`` whose flags line ends with ``extra``."""

    def write(extra: str) -> None:
        path = tmp_path / "cpuinfo"
        path.write_text(CPUINFO.format(extra=extra))
        monkeypatch.setattr(precision_module, "CPUINFO", path)
        precision_module.cpu_has_native_bf16.cache_clear()

    yield write
    precision_module.cpu_has_native_bf16.cache_clear()


@pytest.fixture
def native_bf16(monkeypatch):
    """Whether the CPU counts as computing bf16 natively (torch's CPU autocast runs bf16 either way)."""
    return lambda native: monkeypatch.setattr(precision_module, "cpu_has_native_bf16", lambda: native)


def test_cpu_flags_are_read_from_the_flags_line():
    assert cpu_flags(CPUINFO.format(extra="avx512_bf16")) == {"fpu", "sse2", "avx2", "avx512f", "avx512_bf16"}
    assert cpu_flags("processor\t: 0\n") == frozenset()


@pytest.mark.parametrize(
    "flags, amp, expected",
    [
        ("avx512_bf16", True, torch.bfloat16),
        ("amx_bf16 amx_tile", True, torch.bfloat16),
        ("avx512_bf16", False, torch.float32),  # amp false forces float32
        ("avx512_vnni", True, torch.float32),  # AVX-512 without its bf16 extension emulates bf16: float32
        ("", True, torch.float32),
    ],
)
def test_a_cpu_trains_in_bf16_only_when_its_flags_say_it_computes_bf16(cpuinfo, flags, amp, expected):
    cpuinfo(flags)
    assert precision(amp, CPU) == expected


def test_cuda_trains_in_bf16_with_amp_whatever_the_cpu(cpuinfo):
    cpuinfo("")
    assert precision(True, CUDA) == torch.bfloat16 and precision(False, CUDA) == torch.float32


def test_a_machine_without_cpuinfo_trains_in_float32(tmp_path, monkeypatch):
    monkeypatch.setattr(precision_module, "CPUINFO", tmp_path / "absent")
    precision_module.cpu_has_native_bf16.cache_clear()
    try:
        assert precision(True, CPU) == torch.float32
    finally:
        precision_module.cpu_has_native_bf16.cache_clear()


def test_distance_margin_objectives_decline_bf16_on_the_cpu_not_on_cuda(cpuinfo):
    cpuinfo("avx512_bf16")
    for objective in (PATripletObjective("same"), LabelTripletObjective(), PairLossObjective(build_pair_loss("contrastive"))):
        assert precision(True, CPU, objective) == torch.float32 and precision(True, CUDA, objective) == torch.bfloat16
    assert precision(True, CPU, CrossEntropyObjective()) == torch.bfloat16


@pytest.mark.parametrize(
    "native, objective, said",
    [(True, "fdsl", "bfloat16"), (False, "fdsl", "float32"), (True, "pa_triplet", "float32")],
)
def test_the_first_line_says_the_precision(tiny_table, tmp_path, caplog, native_bf16, native, objective, said):
    native_bf16(native)
    with caplog.at_level(logging.INFO, logger="fdsml.training.loop"):
        pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path, objective=objective, train={"max_steps": 1}))
    first = next(record.getMessage() for record in caplog.records if record.name == "fdsml.training.loop")
    assert first.startswith(f"Training on cpu in {said}, world size 1")


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


@pytest.mark.parametrize("first_amp, then_amp", [(False, True), (True, False)])
def test_the_checkpoint_records_its_precision_and_resume_refuses_another(tiny_table, tmp_path, native_bf16, first_amp, then_amp):
    native_bf16(True)
    checkpoint = tmp_path / "run" / "last.pt"
    _train(tiny_table, tiny_config(tmp_path, objective="fdsl", train={"max_steps": 2, "amp": first_amp}), checkpoint)
    written_in = torch.load(checkpoint, weights_only=True)["precision"]
    assert written_in == str(torch.bfloat16 if first_amp else torch.float32)
    longer = tiny_config(tmp_path, objective="fdsl", train={"max_steps": 4, "amp": then_amp})
    with pytest.raises(ConfigError, match=rf"last.pt: trained in {written_in[6:]}, .*pretrain.train.amp: {str(then_amp).lower()}\); .*Set pretrain.train.amp: {str(first_amp).lower()}"):
        _train(tiny_table, longer, checkpoint)
    assert torch.load(checkpoint, weights_only=True)["step"] == 2  # untouched
    resumed = _train(tiny_table, tiny_config(tmp_path, objective="fdsl", train={"max_steps": 4, "amp": first_amp}), checkpoint)
    assert resumed.history["step"].tolist() == [1, 2, 3, 4]
