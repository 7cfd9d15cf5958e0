"""Before its first node a run checks, on every replica, the parameters and dataset folders of every
selected pipeline; when one replica finds a problem, all stop together with one message."""

import os
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from fdsml.pipelines.run_checks import CHECKS, RunCheckError, check_run

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


def test_every_parameter_section_a_pipeline_reads_is_checked_before_the_first_node():
    from kedro.framework.project import pipelines
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(Path(__file__).resolve().parents[1])
    read = {i.split(":", 1)[1].split(".")[0] for pipe in pipelines.values() for i in pipe.inputs() if i.startswith("params:")}
    assert read <= set(CHECKS), f"parameter sections no check reads before the first node: {sorted(read - set(CHECKS))}"


@pytest.mark.parametrize(
    ("key", "params", "named"),
    [
        ("validate_descriptor", {"n_triplets": 0}, "validate_descriptor.n_triplets"),
        ("robustness", {"severities": [9]}, "severities"),
        ("analysis", {"no_such_key": 1}, "no_such_key"),
        ("export", {"no_such_key": 1}, "no_such_key"),
    ],
)
def test_a_bad_value_of_every_section_stops_the_run_naming_it(key, params, named):
    with pytest.raises(RunCheckError, match=named):
        check_run({key: params})
