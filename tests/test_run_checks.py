"""Before its first node a run checks, on every replica, the parameters and dataset folders of every
selected pipeline; when one replica finds a problem, all stop together with one message."""

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from fdsml.pipelines.run_checks import RunCheckError, check_run

from .fresh_clone import fresh_clone, run


def _check_as_replica(rank: int, port: int, folder: str) -> None:
    """Rank 1 alone lacks the probe's folder (node-local disks differ); each replica notes what it raised."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    root = folder if rank == 0 else f"{folder}/absent"
    try:
        check_run({"pretrain": {"validation": {"every": 5, "probe": {"dataset": "cub", "root": root}}}})
        raised = "nothing"
    except RunCheckError as error:
        raised = str(error)
    with open(f"{folder}/raised{rank}", "w") as out:
        out.write(raised)
    torch.distributed.destroy_process_group()


def test_a_folder_missing_on_one_replica_stops_every_replica_with_one_message(tmp_path):
    for name in ("images.txt", "image_class_labels.txt", "classes.txt"):  # CUB's layout, no images listed
        (tmp_path / name).write_text("")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(_check_as_replica, args=(port, str(tmp_path)), nprocs=2, join=True)
    first, second = ((tmp_path / f"raised{rank}").read_text() for rank in range(2))
    assert first == second and first.startswith("CUB-200-2011") and f"{tmp_path}/absent" in first and first.endswith("(rank 1)")


@pytest.mark.slow
def test_a_bad_parameter_stops_kedro_run_before_the_fractals_are_generated(tmp_path):
    clone = fresh_clone(tmp_path)
    code, output = run("kedro run --pipelines=pretrain --params=pretrain.train.epochs=0", clone)
    assert code != 0 and "pretrain.train.epochs" in " ".join(output.split()), output[-3000:]
    assert not (clone / "data" / "02_intermediate" / "fractal_codes.parquet").exists() and "finefractaldb:" not in output
