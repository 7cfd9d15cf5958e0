"""Ready for the first GPU: every CUDA path of the project in a few minutes, printed as one table.

    python benchmarks/gpu_check.py --quick-device  # a short GPU loan: the renderer, steps, resume; <= 8 minutes
    python benchmarks/gpu_check.py                 # on one GPU, every row
    python benchmarks/gpu_check.py --quick         # tiny sizes; runs on the CPU too

Every row runs in a child process of its own with a timeout (``--quick-device`` also keeps to 8 minutes in all: rows
left when the budget is spent say so), in a session of its own (a timeout stops it and all it started), its output in
a file (a pipe nobody reads fills and blocks the child), and the table is rewritten atomically to ``--table`` after
every row, so a check killed part-way keeps its finished rows.

Each row runs the project's own code: ``train`` (bf16 autocast, channels-last, cuDNN benchmark, TF32, optionally
``torch.compile``) for pre-training steps of ResNet-50 and ViT-Tiny, PA-Triplet (batch mode) images/s against
cross-entropy on the same backbone and batch (target >= 90 %), batch mining at B = 512, a CouCE fine-tuning step, and
the rendering rows: the Triton kernel alone in images/s (CUDA events around
:func:`fdsml.ifs.render_triton.render_tensors` on codes already packed on the device), the host's packing per image
timed on its own (timing ``render_batch`` would report the host's packing rate whatever the GPU does), and
pre-training with ``source: device`` against ``source: render``. What must hold on a GPU is a test of the suite,
which a row runs there (a skip is a failure): the kernels draw the Numba renderer's bytes, a killed run resumes to
the uninterrupted weights on CUDA, and ``pretrain()`` under ``torchrun --nproc_per_node=2`` over NCCL (on a machine
with two GPUs). Without the GPUs a row needs it is skipped with the reason; with ``--quick`` the others run on the
CPU at tiny sizes (the test suite does that).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS for the exact-resume row, set before any CUDA work

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]  # its sibling modules and the tests' helpers, also when loaded by path
from timing import best_seconds  # noqa: E402
from triplet_mining import mining_cost  # noqa: E402
from fdsml.atomic import atomic_path  # noqa: E402
from fdsml.ifs import determinant_probabilities, sample_sigma_factor_code  # noqa: E402
from fdsml.losses.couce import CouCESettings, build_couce_objective  # noqa: E402
from fdsml.timers import Measured  # noqa: E402
from fdsml.models import build_model  # noqa: E402
from fdsml.training.loop import train  # noqa: E402
from fdsml.training.loop_config import LoopConfig, OptimizerConfig  # noqa: E402
from fdsml.training.objectives import CrossEntropyObjective  # noqa: E402
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective  # noqa: E402
from fdsml.training.training_plan import PlanKeys, plan_training  # noqa: E402
from tests.servers import stop_group  # noqa: E402

TRIPLET_TARGET = 0.9
QUICK_DEVICE_BUDGET_S = 480
MIN_ROW_S = 20
"""A row is not started with less of the budget left."""
RENDERER_BYTES_TEST = "tests/ifs/test_render_triton.py::test_on_a_gpu_every_specialisation_draws_the_numba_renderers_bytes"
"""The test that holds the Triton kernels, compiled for the GPU, to the Numba renderer's bytes."""
RESUME_TEST = "tests/training/test_pretrain.py::test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one[cuda]"
TORCHRUN_TEST = "tests/training/test_torchrun.py::test_held_out_validation_with_the_probe_finishes_under_two_replicas[cuda]"


@dataclass(frozen=True)
class Sizes:
    """Image side, classes x instances per batch, training steps (the first two are warm-up)."""

    image: int
    classes: int
    instances: int
    steps: int
    mining_batch: int

    @property
    def batch(self) -> int:
        return self.classes * self.instances


FULL = Sizes(image=224, classes=32, instances=4, steps=8, mining_batch=512)
QUICK = Sizes(image=16, classes=2, instances=3, steps=3, mining_batch=512)


class SyntheticImages(torch.utils.data.Dataset):
    """Random images with P x K labels and descriptors: the model's speed, not the renderer's."""

    def __init__(self, sizes: Sizes, count: int, seed: int = 0):
        generator = torch.Generator().manual_seed(seed)
        self.bank = torch.rand(8, 3, sizes.image, sizes.image, generator=generator)
        self.psi = torch.randn(count, 6, generator=generator)
        self.batch, self.instances = sizes.batch, sizes.instances

    def __len__(self) -> int:
        return self.psi.shape[0]

    def __getitem__(self, index: int) -> dict:
        label = (index % self.batch) // self.instances
        return {"image": self.bank[index % self.bank.shape[0]], "label": label, "psi": self.psi[index]}


def run_training(model, objective, sizes: Sizes, device: str, folder: Path, *, compile_model=False, optimizer="sgd"):
    """``train`` on synthetic batches, trunk and head in bf16 whatever the objective declares (these rows time the bf16
    path, like for like); the history (per-step device time in ``step_s``)."""
    batches = [list(range(step * sizes.batch, (step + 1) * sizes.batch)) for step in range(sizes.steps)]
    loop = LoopConfig(max_steps=sizes.steps, device=device, compile=compile_model, checkpoint_every=100, log_every=sizes.steps,
                      bf16_parts=("trunk", "head"))
    config = OptimizerConfig(name=optimizer, base_lr=0.01, schedule="constant")
    plan = plan_training("gpu_check", images=sizes.batch * sizes.steps, batch_per_replica=sizes.batch, world_size=1,
                         optimizer=config, loop=loop, keys=PlanKeys(batch="--quick", warmup="-"))
    dataset = SyntheticImages(sizes, sizes.batch * sizes.steps)
    return train(model, objective, dataset, batches, loop, config, folder / "last.pt", plan=plan).history


def images_per_second(history, sizes: Sizes) -> float:
    """Median images/s of the steps after warm-up, from the device-timed step."""
    timed = history["step_s"].iloc[min(2, len(history) - 1):]
    return sizes.batch / statistics.median(timed)


def check_pretraining(device, sizes, folder, backbone, compile_model):
    model = build_model(backbone, embedding_dim=64, img_size=sizes.image)
    history = run_training(model, PATripletObjective("all", "batch", max_triplets=65536), sizes, device, folder,
                           compile_model=compile_model, optimizer="adamw" if "vit" in backbone else "sgd")
    loss = history["loss"].iloc[-1]
    status = "ok" if torch.isfinite(torch.tensor(loss)) else "FAIL"
    return status, f"{images_per_second(history, sizes):,.0f} img/s, last loss {loss:.4f}"


def check_triplet_against_cross_entropy(device, sizes, folder, backbone):
    """PA-Triplet (batch mode) images/s as a share of cross-entropy's on the same backbone and batch."""
    speeds = {}
    for name, objective, head in (("triplet", PATripletObjective("all", "batch", max_triplets=65536), {"embedding_dim": 64}),
                                  ("ce", CrossEntropyObjective(), {"head": "classifier", "num_classes": sizes.classes})):  # fmt: skip
        model = build_model(backbone, img_size=sizes.image, **head)
        speeds[name] = images_per_second(run_training(model, objective, sizes, device, folder / name), sizes)
    ratio = speeds["triplet"] / speeds["ce"]
    status = "ok" if ratio >= TRIPLET_TARGET else "BELOW TARGET"
    return status, f"{ratio:.0%} ({speeds['triplet']:,.0f} vs {speeds['ce']:,.0f} img/s; target >= {TRIPLET_TARGET:.0%})"


def check_mining(device, sizes, folder):
    kept, seconds, peak = mining_cost("all", sizes.mining_batch, 4, 65536, device, repeats=1)
    peak = "n/a" if peak is None else f"{peak / 2**20:.1f} MiB"
    return "ok", f"B = {sizes.mining_batch}, {kept:,} triplets in {seconds * 1e3:.1f} ms, peak {peak}"


def check_couce(device, sizes, folder):
    model = build_model("resnet50" if sizes is FULL else "resnet18", embedding_dim=64, img_size=sizes.image)
    objective = build_couce_objective(CouCESettings(), "proxy_anchor", sizes.classes, 64)
    history = run_training(model, objective, sizes, device, folder, optimizer="adamw")
    return "ok", f"{images_per_second(history, sizes):,.0f} img/s, last loss {history['loss'].iloc[-1]:.4f}"


KERNEL_SETTINGS = ((64, 4_000), (256, 100_000))
"""(size, points) of the kernel rows: the embedded default and the published setting."""
KERNEL_BATCH = 4096
KERNEL_WALKERS = 64
KERNEL_TARGET = 100_000
"""images/s at 256 px / 100,000 points on an H200 (the published CUDA on-the-fly renderer's order)."""
RENDER_SHARE_TARGET = 0.10
"""Most of a ViT-Tiny pre-training step rendering may take."""


def device_codes(count: int, device) -> tuple[torch.Tensor, ...]:
    """``count`` FineFractalDB-like codes packed (:func:`fdsml.ifs.render_triton.packed_codes`) and on ``device``, with seeds."""
    from fdsml.ifs.render_triton import packed_codes

    rng = np.random.default_rng(27)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(count)]
    packed = packed_codes(codes, [determinant_probabilities(code) for code in codes])
    seeds = rng.integers(2**62, size=count)
    return tuple(torch.as_tensor(array, device=device) for array in (*packed, seeds))


def kernel_seconds(tensors, size: int, points: int, repeats: int = 3) -> float:
    """The fastest of ``repeats`` renderings of the packed batch, timed on its device after a warm-up."""
    from fdsml.ifs.render_triton import render_tensors

    arguments = dict(size=size, points=points, mode="patch", margin=2, burn_in=20, walkers=KERNEL_WALKERS)
    render_tensors(*tensors, **arguments)
    return best_seconds(lambda: render_tensors(*tensors, **arguments), repeats, tensors[0].device)


def check_kernel(device, sizes, folder, size: int, points: int):
    """The renderer alone: images/s of a batch already packed and on the GPU."""
    rate = KERNEL_BATCH / kernel_seconds(device_codes(KERNEL_BATCH, device), size, points)
    target = points >= 100_000
    status = "ok" if not target or rate >= KERNEL_TARGET else "BELOW TARGET"
    goal = f"; target >= {KERNEL_TARGET:,} on an H200" if target else ""
    return status, f"{rate:,.0f} images/s (batch {KERNEL_BATCH}, W = {KERNEL_WALKERS}, CUDA events{goal})"


def check_packing(device, sizes, folder):
    """The host's share: packing codes for the kernel (:func:`fdsml.ifs.render_triton.packed_codes`) and the
    device source's packed rows (:class:`fdsml.data.device_render.DeviceRenderedCodes`), in µs per image."""
    from fdsml.data.device_render import DeviceRenderedCodes
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table
    from fdsml.ifs.render_triton import packed_codes

    rng = np.random.default_rng(27)
    count = 512
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(count)]
    probabilities = [determinant_probabilities(code) for code in codes]
    packing = best_seconds(lambda: packed_codes(codes, probabilities), 3) / count
    spec = family_spec({"n_classes": 8, "instances_per_class": 8, "class_filter": {"enabled": False}, "render": {"size": 32, "points": 200}})
    table, _ = generate_table(spec)
    dataset = DeviceRenderedCodes(table, spec, seed=1, fresh_noise=True)
    indices = np.arange(len(table))
    rows = best_seconds(lambda: dataset.collated_items(indices), 3) / len(indices)
    return "ok", f"packed_codes {packing * 1e6:.0f} µs/image, device source's packed rows {rows * 1e6:.0f} µs/image (host)"


def check_device_source(device, sizes, folder):
    """ViT-Tiny pre-training images/s at the published rendering (256 px, 100,000 points, shown to the
    model at 224 px), ``source: device`` against ``source: render`` with a loader worker per core, and
    rendering's share of a step (one batch's kernel time over the device source's step time)."""
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table
    from fdsml.training.pretrain import parse_pretrain_params, pretrain

    batch = 128
    spec = family_spec({"n_classes": 32, "instances_per_class": 8, "class_filter": {"enabled": False}, "workers": os.cpu_count(),
                        "render": {"size": 256, "points": 100_000, "walkers": KERNEL_WALKERS}})
    table, _ = generate_table(spec)
    speeds = {}
    for source in ("render", "device"):
        config = parse_pretrain_params({
            "objective": "pa_triplet", "model": {"backbone": "vit_tiny_patch16_224", "img_size": 224},
            "data": {"source": source, "classes_per_batch": 16, "instances_per_class": 8},
            "optimizer": {"name": "adamw", "base_lr": 0.001, "schedule": "constant"}, "validation": {"every": 0}, "run_dir": str(folder / source),
            "train": {"max_steps": 12, "device": device, "num_workers": os.cpu_count(), "checkpoint_every": 100, "log_every": 1},
        })  # fmt: skip
        _, history = pretrain(table, spec, config)
        speeds[source] = statistics.median(history["images_per_s"].iloc[4:])
    share = kernel_seconds(device_codes(batch, device), 256, 100_000) / (batch / speeds["device"])
    status = "ok" if share < RENDER_SHARE_TARGET else "BELOW TARGET"
    return status, (f"device {speeds['device']:,.0f} img/s, render with {os.cpu_count()} workers {speeds['render']:,.0f} img/s; "
                    f"rendering {share:.0%} of a device step (target < {RENDER_SHARE_TARGET:.0%})")


class TestReports:
    """pytest's reports of one run: every test's call, and any setup or teardown that did not pass."""

    def __init__(self):
        self.reports = []

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or not report.passed:
            self.reports.append(report)

    def problem(self) -> str | None:
        """None when exactly one test ran and passed; else what went wrong first (a skip is no pass)."""
        if len(self.reports) == 1 and self.reports[0].passed:
            return None
        failed = next((report for report in self.reports if not report.passed), None)
        if failed is None:
            return f"{len(self.reports)} tests ran, not one"
        return failed.longrepr[2] if failed.skipped else str(failed.longrepr).strip().splitlines()[-1]


def check_test(device, sizes, folder, node: str):
    """The test ``node`` (a path under the repository root and its name), run here by pytest."""
    import pytest

    reports = TestReports()
    pytest.main(["-q", "-p", "no:cacheprovider", str(ROOT / node)], plugins=[reports])
    problem = reports.problem()
    if problem:
        return "FAIL", problem[:160]
    return "ok", f"{node.split('::')[-1]} passed in {reports.reports[0].duration:.1f} s"


@dataclass(frozen=True)
class Check:
    """One row: its name, the CUDA devices it needs, ``function(device, sizes, folder) -> (status, detail)``, and
    the most seconds its child process may run."""

    name: str
    gpus: int
    function: Callable
    limit_s: float


def rendering_checks() -> list[Check]:
    """The rendering rows: the kernels' bytes (a test) and their speed; the packing is the host's and runs anywhere."""
    rows = [Check("renderer bytes = Numba, every specialisation", 1, lambda d, s, f: check_test(d, s, f, RENDERER_BYTES_TEST), 180)]
    rows += [
        Check(f"kernel alone, {size} px / {points:,} points", 1,
              lambda d, s, f, size=size, points=points: check_kernel(d, s, f, size, points), 90)
        for size, points in KERNEL_SETTINGS
    ]
    return rows + [
        Check("host packing per image", 0, check_packing, 60),
        Check("pre-training img/s, source device vs render", 1, check_device_source, 240),
    ]


def model_checks(sizes: Sizes, quick_device: bool) -> list[Check]:
    """Pre-training steps plain and compiled, and with the full check the objectives, mining, CouCE and torchrun."""
    backbones = ("resnet50", "vit_tiny_patch16_224") if sizes is FULL else ("resnet18", "vit_tiny_patch4")
    plain = [Check(f"pre-training {b}", 0, lambda d, s, f, b=b: check_pretraining(d, s, f, b, False), 120) for b in backbones]
    compiled = [Check(f"pre-training {b}, compiled", 1, lambda d, s, f, b=b: check_pretraining(d, s, f, b, True), 240) for b in backbones]
    resume = Check("checkpoint + exact resume", 1, lambda d, s, f: check_test(d, s, f, RESUME_TEST), 180)
    if quick_device:
        return plain + [resume] + compiled
    return plain + compiled + [
        Check(f"PA-Triplet vs CE img/s, {backbones[0]}", 0,
              lambda d, s, f: check_triplet_against_cross_entropy(d, s, f, backbones[0]), 240),
        Check(f"batch mining B = {sizes.mining_batch}", 0, check_mining, 60),
        Check("CouCE fine-tuning step", 0, check_couce, 120),
        Check("torchrun x2 over NCCL, pretrain()", 2, lambda d, s, f: check_test(d, s, f, TORCHRUN_TEST), 240),
        resume,
    ]


def checks(mode: str) -> list[Check]:
    """The rows of ``mode`` in the order they run: for ``quick-device`` the renderer first (what a short loan is for)."""
    sizes = QUICK if mode == "quick" else FULL
    if mode == "quick-device":
        return rendering_checks() + model_checks(sizes, True)
    return model_checks(sizes, False) + rendering_checks()


MODES = {"quick": None, "quick-device": QUICK_DEVICE_BUDGET_S, "full": None}
"""Each mode's budget in seconds for all its rows (None: each row's own limit only)."""


@dataclass
class TableFile:
    """The table, rewritten to ``path`` atomically as its rows come (a reader sees whole rows)."""

    path: Path
    title: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, name: str, status: str, detail: str) -> None:
        self.rows.append((name, status, detail))
        with atomic_path(self.path) as temporary:
            temporary.write_text(self.text())

    def text(self) -> str:
        width = max([len("check")] + [len(name) for name, _, _ in self.rows])
        lines = [self.title, f"{'check':<{width}}  {'status':<12}  detail"]
        lines += [f"{name:<{width}}  {status:<12}  {detail}" for name, status, detail in self.rows]
        return "\n".join(lines) + "\n"


def run_row(mode: str, index: int, folder: Path, result: Path) -> None:
    """Child process: row ``index`` of ``mode``, its (status, detail, seconds) written to ``result``."""
    check = checks(mode)[index]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with Measured(device) as measured:
        try:
            status, detail = check.function(device, QUICK if mode == "quick" else FULL, folder)
        except Exception as error:  # the row fails with its reason; the parent goes on with the others
            traceback.print_exc()
            status, detail = "FAIL", f"{type(error).__name__}: {error}"[:160]
    with atomic_path(result) as temporary:
        temporary.write_text(json.dumps([status, detail, measured.seconds]))


def run_child(command: list[str], log: Path, timeout_s: float) -> tuple[int | None, str]:
    """``command`` in a session of its own, its output in ``log``, to its end or ``timeout_s`` (then it is stopped
    with all it started): its exit status (None on a timeout) and its last line of output."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        status = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group(process)
        status = None
    lines = log.read_text(errors="replace").strip().splitlines()
    return status, lines[-1][:100] if lines else "(no output)"


def row_in_child(mode: str, index: int, folder: Path, timeout_s: float) -> tuple[str, str]:
    """Row ``index`` in a child process of its own (a CUDA fault or a hang costs one row), with a timeout."""
    folder.mkdir(parents=True, exist_ok=True)
    result = folder / "result.json"
    command = [sys.executable, __file__, "--row", str(index), "--mode", mode, "--scratch", str(folder), "--result", str(result)]
    status, last_line = run_child(command, folder / "row.log", timeout_s)
    if status is None:
        return "TIMEOUT", f"stopped after {timeout_s:.0f} s; last output: {last_line}"
    if not result.exists():
        return "FAIL", f"exit {status} without a result: {last_line}"
    outcome, detail, seconds = json.loads(result.read_text())
    return outcome, f"{detail} [{seconds:.1f} s]"


def main(argv: list[str] | None = None) -> list[tuple[str, str, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="tiny sizes; on a CPU-only machine the non-CUDA rows run on the CPU")
    group.add_argument("--quick-device", action="store_true", help=f"the rows a short GPU loan needs, within {QUICK_DEVICE_BUDGET_S // 60} minutes")
    parser.add_argument("--table", type=Path, default=Path(__file__).resolve().parent / "results" / "gpu_check.txt", help="the table, rewritten after every row")
    parser.add_argument("--row", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.row is not None:
        run_row(args.mode, args.row, args.scratch, args.result)
        return []
    mode = "quick" if args.quick else "quick-device" if args.quick_device else "full"
    return run_checks(mode, list(enumerate(checks(mode))), args.table)


def run_checks(mode: str, rows: list[tuple[int, Check]], table_path: Path) -> list[tuple[str, str, str]]:
    """Each row (its index in ``checks(mode)``, the check) in a child process within its limit and what is
    left of the mode's budget, the table rewritten after each."""
    cuda = torch.cuda.is_available()
    gpus = torch.cuda.get_device_name(0) if cuda else "none"
    table = TableFile(table_path, f"gpu_check --{mode}: device {'cuda' if cuda else 'cpu'} ({gpus}), {time.strftime('%Y-%m-%d %H:%M')}")
    if not cuda:
        print("No CUDA device (torch.cuda.is_available() is False): the CUDA rows are skipped.")
        if mode != "quick":
            print("Only --quick runs the other rows on the CPU (at tiny sizes).")
    budget = MODES[mode]
    deadline = time.monotonic() + budget if budget else float("inf")
    with tempfile.TemporaryDirectory() as scratch:
        for index, check in rows:
            left = deadline - time.monotonic()
            if torch.cuda.device_count() < check.gpus:
                table.add(check.name, "skipped", "needs a CUDA device" if check.gpus == 1 else f"needs {check.gpus} CUDA devices")
            elif not cuda and mode != "quick":
                table.add(check.name, "skipped", "no CUDA device; use --quick on the CPU")
            elif left < MIN_ROW_S:
                table.add(check.name, "not run", f"the {budget // 60}-minute budget is spent")
            else:
                table.add(check.name, *row_in_child(mode, index, Path(scratch) / str(index), min(check.limit_s, left)))
            print(table.text().splitlines()[-1], flush=True)
    print(f"\n{table.text()}table in {table_path}")
    return table.rows


if __name__ == "__main__":
    outcome = main()
    sys.exit(1 if any(status in ("FAIL", "TIMEOUT") for _, status, _ in outcome) else 0)
