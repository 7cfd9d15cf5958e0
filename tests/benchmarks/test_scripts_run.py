"""Every measuring script of benchmarks/ runs at a tiny size, as a user runs it, and prints the columns
docs/benchmarks.md says it prints. The ones that take minutes (compiling, a DVC stage, many steps) are slow."""

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT

TINY = {  # script -> (its arguments at a tiny size, what its output must hold)
    "chamfer_speed": (["--size", "64", "--points", "2000", "--pairs", "4", "--brute-pairs", "1", "--repeats", "2", "--json"],
                      ['"batched_speedup"', '"agrees_with_brute_force": true', '"agrees_with_scipy_cdt": true']),
    "decode_check": (["--images", "20", "--width", "100", "--height", "75"], ["first check (decode all)", "second check (cached)", "x the first", "search for copies alone"]),
    "render_speed/generate": (["--generate", "--classes", "2", "--instances", "2", "--workers", "1", "--size", "32", "--points", "500",
                               "--full-classes", "4", "--json"],
                         ['"extrapolated_full_minutes"', '"instance_acceptance_rate"']),
    "triplet_mining": (["--sizes", "16", "32", "--repeats", "1", "--threads", "1"], ["allowed", "peak MiB", "x vs B0", "vs explicit"]),
}
SLOW = {
    "couce_step": (["--img-size", "32", "--batch", "8", "--classes", "4", "--embedding", "16", "--repeats", "2", "--threads", "1"],
                   ["ms/step", "x baseline", "full CouCE"]),
    "render_speed": (["--size", "32", "--points", "500", "--images", "4", "--walkers", "1,2", "--rounds", "1", "--json"],
                     ['"ratio_to_one_walker"', '"floor_ns_per_point"', '"share_orbit"']),
    "retrieval_metrics_scale": (["--items", "300", "--dim", "8", "--classes", "50", "--ks", "1", "10", "--threads", "1"],
                                ["part of the full metric set", "share", "pytorch-metric-learning (per-class loop)", "(same values)"]),
    "render_speed/rcdb": (["--family", "rcdb", "--size", "64", "--images", "4", "--reference-images", "2", "--json"],
                          ['"ratio_to_pil_per_segment"', '"ratio_to_pil_per_orbit"']),
    "loader_throughput/fresh": (["--fresh", "--classes", "2", "--instances", "2", "--rounds", "1"], ["table ms/img", "fresh ms/img", "fresh/table"]),
    "loader_throughput": (["--size", "32", "--points", "500", "--img-size", "32", "--images", "16", "--batch", "8", "--rows", "64",
                           "--rounds", "1", "--model-speed", "100"], ["1 worker img/s", "vs renderer", "workers to feed", "model_input on"]),
    "pretrain_step": (["--rounds", "1", "--batches", "1", "--precisions", "float32", "bf16"],
                      ["| project ms | bare timm ms | project / bare |", "amp true / amp false step time"]),
    "pretrain_step/compile": (["--env", "cpu", "--rounds", "1", "--batches", "1", "--precisions", "float32", "--compile"],
                              ["compile (cold cache", "compiled / eager", "net"]),
    "pretrain_step/run": (["--env", "base", "--run", "2", "--rounds", "1", "--json"],
                          ['"whole: float32 / bf16"', '"full run: float32 / bf16"', '"bf16 computes in"']),
    "host_syncs": (["--steps", "1", "--classes", "2", "--instances", "2"], ["per step", "pretrain.data.source: device"]),
    "default_chain": (["--stages", "fractals", "--json"], ['"total_s"', '"load_before"']),
}


def run_script(case: str, arguments: list[str]) -> str:
    """What ``benchmarks/<case>.py ARGUMENTS`` prints (a case may name a second use of a script: ``<script>/<use>``)."""
    script = ROOT / "benchmarks" / f"{case.split('/')[0]}.py"
    environment = os.environ | {"PYTHONPATH": str(ROOT / "src"), "KEDRO_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(script), *arguments], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


CASES = [*sorted(TINY), *(pytest.param(case, marks=pytest.mark.slow) for case in sorted(SLOW))]


@pytest.mark.parametrize("case", CASES)
def test_a_script_runs_at_a_tiny_size_and_prints_its_columns(case):
    arguments, expected = (TINY | SLOW)[case]
    printed = run_script(case, arguments)
    assert all(text in printed for text in expected), printed
    if "--json" in arguments:
        json.loads(printed.strip().splitlines()[-1])
