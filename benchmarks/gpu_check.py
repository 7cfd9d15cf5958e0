"""Ready for the first GPU: every CUDA path of the project in a few minutes, printed as one table.

    python benchmarks/gpu_check.py            # on one GPU, under 5 minutes
    python benchmarks/gpu_check.py --quick    # tiny sizes, a few seconds; runs on the CPU too

Each row runs the project's own code: ``train`` (bf16 autocast, channels-last, cuDNN benchmark,
TF32, optionally ``torch.compile``) for pre-training steps of ResNet-50 and ViT-Tiny, PA-Triplet
(batch mode) images/s against cross-entropy on the same backbone and batch (target >= 90 %),
batch mining at B = 512, a CouCE fine-tuning step, a checkpoint with an exact resume, and the
project's own ``pretrain()`` under ``torchrun --nproc_per_node=2`` (validation with the probe, a
stop and an exact resume), over NCCL where two GPUs exist and gloo otherwise (the row says which).
Without CUDA the CUDA rows are skipped with the reason; with ``--quick`` the others run on the CPU
at tiny sizes (the test suite does that).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS for the exact-resume row

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from fdsml.losses.couce import CouCESettings, build_couce_objective  # noqa: E402
from fdsml.losses.pa_triplet import mine_batch_triplets  # noqa: E402
from fdsml.measure import Measured  # noqa: E402
from fdsml.models import build_model  # noqa: E402
from fdsml.training.loop import train  # noqa: E402
from fdsml.training.loop_config import LoopConfig, OptimizerConfig  # noqa: E402
from fdsml.training.objectives import CrossEntropyObjective, PATripletObjective  # noqa: E402
from fdsml.training.run_arithmetic import PlanKeys, plan_training  # noqa: E402

TRIPLET_TARGET = 0.9


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


class Interrupted(Exception):
    """Raised by :class:`StopAfter` to kill a run mid-way."""


class StopAfter:
    """A batch sampler that fails after ``limit`` batches: a run killed between checkpoints."""

    def __init__(self, batches: list[list[int]], limit: int | None = None):
        self.batches, self.limit = batches, limit

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for position, batch in enumerate(self.batches):
            if self.limit is not None and position >= self.limit:
                raise Interrupted
            yield batch


def run_training(model, objective, sizes: Sizes, device: str, folder: Path, *, compile_model=False, optimizer="sgd",
                 deterministic=False, stop_after=None, checkpoint_every=100):
    """``train`` on synthetic batches; the history (per-step device time in ``step_s``)."""
    batches = [list(range(step * sizes.batch, (step + 1) * sizes.batch)) for step in range(sizes.steps)]
    loop = LoopConfig(max_steps=sizes.steps, device=device, compile=compile_model, deterministic=deterministic,
                      checkpoint_every=checkpoint_every, log_every=sizes.steps)
    config = OptimizerConfig(name=optimizer, base_lr=0.01, schedule="constant")
    plan = plan_training("gpu_check", images=sizes.batch * sizes.steps, batch_per_replica=sizes.batch, world_size=1,
                         optimizer=config, loop=loop, keys=PlanKeys(batch="--quick", warmup="-"))
    dataset = SyntheticImages(sizes, sizes.batch * sizes.steps)
    return train(model, objective, dataset, StopAfter(batches, stop_after), loop, config, folder / "last.pt", plan=plan).history


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
    for name, objective, head in (
        ("triplet", PATripletObjective("all", "batch", max_triplets=65536), {"embedding_dim": 64}),
        ("ce", CrossEntropyObjective(), {"head": "classifier", "num_classes": sizes.classes}),
    ):
        model = build_model(backbone, img_size=sizes.image, **head)
        speeds[name] = images_per_second(run_training(model, objective, sizes, device, folder / name), sizes)
    ratio = speeds["triplet"] / speeds["ce"]
    status = "ok" if ratio >= TRIPLET_TARGET else "BELOW TARGET"
    return status, f"{ratio:.0%} ({speeds['triplet']:,.0f} vs {speeds['ce']:,.0f} img/s; target >= {TRIPLET_TARGET:.0%})"


def check_mining(device, sizes, folder):
    labels = torch.arange(sizes.mining_batch // 4, device=device).repeat_interleave(4)
    psi = torch.randn(labels.shape[0], 6, device=device)
    generator = torch.Generator(device=device).manual_seed(0)
    mine_batch_triplets(labels, psi, "all", max_triplets=65536, generator=generator)
    with Measured(device) as measured:
        kept = mine_batch_triplets(labels, psi, "all", max_triplets=65536, generator=generator)[0].shape[0]
    peak = "n/a" if measured.peak_bytes is None else f"{measured.peak_bytes / 2**20:.1f} MiB"
    return "ok", f"B = {labels.shape[0]}, {kept:,} triplets in {measured.seconds * 1e3:.1f} ms, peak {peak}"


def check_couce(device, sizes, folder):
    model = build_model("resnet50" if sizes is FULL else "resnet18", embedding_dim=64, img_size=sizes.image)
    objective = build_couce_objective(CouCESettings(), "proxy_anchor", sizes.classes, 64)
    history = run_training(model, objective, sizes, device, folder, optimizer="adamw")
    return "ok", f"{images_per_second(history, sizes):,.0f} img/s, last loss {history['loss'].iloc[-1]:.4f}"


def check_resume(device, sizes, folder):
    """Killed after a checkpoint, restarted: the weights must equal an uninterrupted run's, bit for bit."""

    def weights(stop_after, where):
        torch.manual_seed(0)
        model = build_model("resnet18", embedding_dim=16, img_size=sizes.image)
        objective = PATripletObjective("all", "batch")
        run = lambda limit: run_training(model, objective, sizes, device, where, deterministic=True,  # noqa: E731
                                         stop_after=limit, checkpoint_every=1)
        if stop_after is not None:
            try:
                run(stop_after)
            except Interrupted:
                pass
        run(None)
        return {name: value.detach().cpu() for name, value in model.state_dict().items()}

    whole, resumed = weights(None, folder / "whole"), weights(sizes.steps - 1, folder / "resumed")
    worst = max((whole[name].double() - resumed[name].double()).abs().max().item() for name in whole)
    return ("ok" if worst == 0 else "FAIL"), f"max |difference| {worst:.3g} after {sizes.steps} steps, resumed at {sizes.steps - 1}"


def check_torchrun_pretrain(device, sizes, folder):
    """The project's ``pretrain()`` under ``torchrun --nproc_per_node=2`` (NCCL on 2 GPUs, gloo on CPU replicas
    otherwise): uint8 rendering converted on the device, validation with the probe, checkpoints, and a
    run stopped after its first checkpoint then resumed, which must end with the uninterrupted run's weights."""
    nccl = torch.cuda.device_count() >= 2
    replica_device = "cuda" if nccl else "cpu"

    def launch(out: Path) -> subprocess.Popen:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", __file__,
                   "--replica", str(out), "--replica-device", replica_device]
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish(run: subprocess.Popen) -> str | None:
        output = run.communicate(timeout=600)[0]
        return None if run.returncode == 0 else output.strip().splitlines()[-1][:100]

    failure = finish(launch(folder / "straight"))
    if failure:
        return "FAIL", failure
    stopped = launch(folder / "stopped")
    while not any((folder / "stopped" / "run").glob("*/last.pt")) and stopped.poll() is None:  # one folder per run fingerprint
        time.sleep(0.05)
    stopped.terminate()  # torchrun ends both replicas
    stopped.communicate(timeout=120)
    if stopped.returncode == 0:
        return "FAIL", "the run ended before it could be stopped after its first checkpoint"
    failure = finish(launch(folder / "stopped"))
    if failure:
        return "FAIL", failure
    whole, resumed = (torch.load(folder / part / "result.pt", weights_only=True) for part in ("straight", "stopped"))
    worst = max((whole["state_dict"][k].double() - resumed["state_dict"][k].double()).abs().max().item() for k in whole["state_dict"])
    backend = "NCCL, 2 GPUs" if nccl else "gloo, 2 CPU replicas (fewer than 2 GPUs)"
    status = "ok" if worst == 0 and len(whole["probe"]) == 3 else "FAIL"  # at initialisation, steps 2 and 4
    return status, f"{backend}: probe Recall@1 {whole['probe']}, resumed max |difference| {worst:.3g}"


def pretrain_replica(out: str, device: str) -> None:
    """One replica of :func:`check_torchrun_pretrain`: 4 pre-training steps of a tiny FineFractalDB; rank 0 saves the result."""
    from fdsml.data.holdout import HoldoutSettings, split_table
    from fdsml.families import FamilySpec
    from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb
    from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig, RenderSettings
    from fdsml.training.pretrain import parse_pretrain_params, pretrain

    torch.set_num_threads(1)
    fractals = FineFractalDBConfig(seed=5, n_classes=4, instances_per_class=6, render=RenderSettings(size=32, points=600),
                                   class_filter=ClassFilter(size=96, points=4000))
    table, _ = generate_finefractaldb(fractals)
    split = split_table(table, HoldoutSettings(instance_fraction=0.2, class_fraction=0.25), seed=0)
    config = parse_pretrain_params({
        "model": {"backbone": "resnet18", "embedding_dim": 16},
        "data": {"classes_per_batch": 3, "instances_per_class": 3},
        "optimizer": {"base_lr": 0.5, "schedule": "constant"},
        "train": {"max_steps": 4, "device": device, "checkpoint_every": 2, "log_every": 1, "deterministic": True},
        "validation": {"every": 2, "triplets": 50, "max_images": 16, "probe": {"image_size": 32, "max_images": 40}},
        "run_dir": f"{out}/run",
    })
    payload, history = pretrain(table, FamilySpec(FINEFRACTALDB, fractals), config, split=split)
    if dist.get_rank() == 0:
        probe = [round(value, 3) for value in history["val_probe_recall_at_1"].dropna()]
        torch.save({"state_dict": payload["state_dict"], "probe": probe}, f"{out}/result.pt")
    dist.destroy_process_group()


# GPU rendering (issue 27): the Triton renderer's images/s on a batch of codes, and its bytes
# against the Numba renderer's on the first images; pre-training images/s with the device source
# against the render source fed by the node's cores.

GPU_RENDER_SETTINGS = ((64, 4_000), (256, 100_000))
"""(size, points) of the GPU rendering rows: the embedded default and the published setting."""
GPU_RENDER_BATCH = 4096
GPU_RENDER_WALKERS = 64
GPU_RENDER_COMPARED = 8


def check_gpu_rendering(device, sizes, folder, size: int, points: int):
    """images/s of ``render_batch`` (patch mode, best of 3 timed batches after a warm-up), and its
    first images byte-compared with :func:`fdsml.ifs.render` at the same walkers."""
    import numpy as np

    from fdsml.ifs import determinant_probabilities, render, sample_sigma_factor_code
    from fdsml.ifs.render_triton import render_batch

    rng = np.random.default_rng(27)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(GPU_RENDER_BATCH)]
    probabilities = [determinant_probabilities(code) for code in codes]
    seeds = rng.integers(2**62, size=GPU_RENDER_BATCH)
    arguments = dict(size=size, points=points, walkers=GPU_RENDER_WALKERS, device=device)
    images = render_batch(codes, probabilities, seeds, **arguments)
    seconds = []
    for _ in range(3):
        torch.cuda.synchronize()
        started = time.perf_counter()
        render_batch(codes, probabilities, seeds, **arguments)
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    reference = np.stack([
        render(c, p, size=size, points=points, seed=int(s), walkers=GPU_RENDER_WALKERS)
        for c, p, s in zip(codes[:GPU_RENDER_COMPARED], probabilities, seeds)
    ])
    equal = np.array_equal(images[:GPU_RENDER_COMPARED].cpu().numpy(), reference)
    detail = f"{GPU_RENDER_BATCH / min(seconds):,.0f} images/s, W = {GPU_RENDER_WALKERS}, bytes {'equal' if equal else 'DIFFER'}"
    return ("ok" if equal else "FAIL"), detail


def check_device_source(device, sizes, folder):
    """ViT-Tiny pre-training images/s at the published rendering (256 px, 100,000 points, shown to
    the model at 224 px), ``source: device`` against ``source: render`` with a loader worker per core."""
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table
    from fdsml.training.pretrain import parse_pretrain_params, pretrain

    spec = family_spec({"n_classes": 32, "instances_per_class": 8, "class_filter": {"enabled": False}, "workers": os.cpu_count(),
                        "render": {"size": 256, "points": 100_000, "walkers": GPU_RENDER_WALKERS}})
    table, _ = generate_table(spec)
    speeds = {}
    for source in ("render", "device"):
        config = parse_pretrain_params({
            "objective": "pa_triplet",
            "model": {"backbone": "vit_tiny_patch16_224", "img_size": 224},
            "data": {"source": source, "classes_per_batch": 16, "instances_per_class": 8},
            "optimizer": {"name": "adamw", "base_lr": 0.001, "schedule": "constant"},
            "train": {"max_steps": 12, "device": device, "num_workers": os.cpu_count(), "checkpoint_every": 100, "log_every": 1},
            "validation": {"every": 0},
            "run_dir": str(folder / source),
        })
        _, history = pretrain(table, spec, config)
        speeds[source] = statistics.median(history["images_per_s"].iloc[4:])
    detail = f"device {speeds['device']:,.0f} img/s, render with {os.cpu_count()} workers {speeds['render']:,.0f} img/s"
    return "ok", detail


def rendering_checks() -> list[tuple[str, bool, callable]]:
    """The GPU rendering rows (need CUDA; the bytes are checked on the CPU by the test suite)."""
    rows = [
        (f"GPU rendering {size} px / {points:,} points", True, lambda d, s, f, size=size, points=points: check_gpu_rendering(d, s, f, size, points))
        for size, points in GPU_RENDER_SETTINGS
    ]
    return rows + [("pre-training img/s, source device vs render", True, check_device_source)]


def checks(sizes: Sizes, cuda: bool) -> list[tuple[str, bool, callable]]:
    """(row, needs CUDA, function(device, sizes, folder)); compiling on the CPU is not checked."""
    backbones = ("resnet50", "vit_tiny_patch16_224") if sizes is FULL else ("resnet18", "vit_tiny_patch4")
    rows = []
    for backbone in backbones:
        rows.append((f"pre-training {backbone}", False, lambda d, s, f, b=backbone: check_pretraining(d, s, f, b, False)))
        rows.append((f"pre-training {backbone}, compiled", True, lambda d, s, f, b=backbone: check_pretraining(d, s, f, b, True)))
    rows += [
        (f"PA-Triplet vs CE img/s, {backbones[0]}", False, lambda d, s, f: check_triplet_against_cross_entropy(d, s, f, backbones[0])),
        (f"batch mining B = {sizes.mining_batch}", False, check_mining),
        ("CouCE fine-tuning step", False, check_couce),
        ("torchrun x2, pretrain()", False, check_torchrun_pretrain),
        ("checkpoint + exact resume", False, check_resume),
    ]
    return rows + rendering_checks()


def main(argv: list[str] | None = None) -> list[tuple[str, str, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes; on a CPU-only machine the non-CUDA rows run on the CPU")
    parser.add_argument("--replica", help=argparse.SUPPRESS)
    parser.add_argument("--replica-device", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.replica:
        pretrain_replica(args.replica, args.replica_device)
        return []
    cuda = torch.cuda.is_available()
    sizes = QUICK if args.quick else FULL
    device = "cuda" if cuda else "cpu"
    if not cuda:
        print("No CUDA device (torch.cuda.is_available() is False): the CUDA rows are skipped.")
        if not args.quick:
            print("Only --quick runs the other rows on the CPU (at tiny sizes).")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for index, (name, needs_cuda, function) in enumerate(checks(sizes, cuda)):
            if not cuda and (needs_cuda or not args.quick):
                results.append((name, "skipped", "needs a CUDA device" if needs_cuda else "no CUDA device; use --quick on the CPU"))
                continue
            with Measured(device) as measured:
                try:
                    status, detail = function(device, sizes, Path(scratch) / str(index))
                except Exception as error:  # one broken path must not hide the others
                    traceback.print_exc()
                    status, detail = "FAIL", f"{type(error).__name__}: {error}"[:100]
            results.append((name, status, f"{detail} [{measured.seconds:.1f} s]"))
    width = max(len(name) for name, _, _ in results)
    print(f"\n{'check':<{width}}  {'status':<12}  detail   (device {device}, {'quick' if args.quick else 'full'} sizes)")
    for name, status, detail in results:
        print(f"{name:<{width}}  {status:<12}  {detail}")
    return results


if __name__ == "__main__":
    outcome = main()
    sys.exit(1 if any(status == "FAIL" for _, status, _ in outcome) else 0)
