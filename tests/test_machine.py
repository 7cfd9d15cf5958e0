"""The machine a run records: the CPU's model from /proc/cpuinfo, and a fallback where that file is absent."""

import platform

from fdsml import machine

CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor @ 2.80GHz\nflags\t\t: fpu sse2\n\nprocessor\t: 1\nmodel name\t: other\n"


def test_a_field_is_the_first_lines_value_and_empty_where_absent():
    assert machine.cpuinfo_field(CPUINFO, "model name") == "Intel(R) Xeon(R) Processor @ 2.80GHz"
    assert machine.cpuinfo_field(CPUINFO, "flags") == "fpu sse2"
    assert machine.cpuinfo_field(CPUINFO, "microcode") == ""


def test_the_cpu_model_is_read_from_cpuinfo(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "cpuinfo")
    assert machine.cpu_model() == "Intel(R) Xeon(R) Processor @ 2.80GHz"


def test_without_cpuinfo_the_cpu_model_is_what_the_platform_says(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "absent")
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert machine.cpu_model() == "arm"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert machine.cpu_model() == "unknown CPU"


def test_a_cpu_machine_is_named_by_its_model_and_cores(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "cpuinfo")
    monkeypatch.setattr(machine.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    assert machine.machine_name() == "Intel(R) Xeon(R) Processor @ 2.80GHz, 2 cores"


def test_a_gpu_machine_is_named_by_its_first_visible_gpu(monkeypatch):
    monkeypatch.setattr(machine.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(machine.torch.cuda, "get_device_name", lambda index: f"NVIDIA H100 #{index}")
    assert machine.machine_name() == "NVIDIA H100 #0"
