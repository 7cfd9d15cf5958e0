"""Before its first node a run checks, on every replica, the parameters and dataset folders of every
selected pipeline; when one replica finds a problem, all stop together with one message."""

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from fdsml.pipelines.run_checks import CHECKS, RunCheckError, check_run

from tests.fresh_clone import fresh_clone, run
from tests.own_images import tiny_sop
from tests.support import ROOT


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

    bootstrap_project(ROOT)
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


@pytest.mark.parametrize(
    ("parameters", "named"),
    [
        ({"pretan": {"train": {"max_steps": 6}}}, "pretan: unknown parameter section; did you mean pretrain.train.max_steps?"),
        ({"retrieval": {"data": {"kss": [1]}}}, r"retrieval.data: unknown key(s) kss (did you mean retrieval.data.ks?)"),
        ({"fractals": {"rcdb": {"vertice": [3, 9]}}}, "fractals.rcdb: unknown key(s) vertice (did you mean fractals.rcdb.vertices?)"),
        ({"fractals": {"family": "rcdb", "rcdb": {}, "n_classe": 3}}, "fractals: unknown key(s) n_classe (did you mean fractals.n_classes?)"),
        ({"plan": {"dataset_size": {}}}, "plan: unknown key(s) dataset_size (did you mean plan.dataset_sizes?)"),
        ({"tune": {"study": "t", "space": [{"key": "pretrain.optimizer.base_lr", "choices": [1]}], "arms": {"a": {"methd": "x"}}}}, "tune.arms.a: unknown key(s) methd"),
        (
            {"tune": {"study": "t", "space": [{"key": "pretrain.optimizer.base_lr", "choices": [1]}], "arms": {"a": {"method": "x", "pretrain": {"fdsl": {"batchs": "shuffled"}}}}}},
            "tune.arms.a.pretrain.fdsl: unknown key(s) batchs (did you mean tune.arms.a.pretrain.fdsl.batches?)",
        ),
        ({"retrieval": {"loss": {"options": {"margn": 0.2}}}}, "retrieval.loss.options.margn: the proxy loss proxy_anchor (ProxyAnchorLoss) takes no argument margn (did you mean margin?)"),
        ({"retrieval": {"loss": {"options": {"embedding_size": 8}}}}, "retrieval.loss.options.embedding_size: fdsml sets it from retrieval.embedding.embedding_dim"),
        ({"pretrain": {"objective": "pml", "pml": {"options": {"alpah": 2}}}}, "pretrain.pml.options.alpah: the pair loss multi_similarity (MultiSimilarityLoss) takes no argument alpah (did you mean alpha?)"),
        ({"pretrain": {"model": {"overrides": {"drop_path_rat": 0.1}}}}, "pretrain.model.overrides.drop_path_rat: timm's resnet18 (ResNet) takes no argument drop_path_rat (did you mean drop_path_rate?)"),
        ({"pretrain": {"model": {"overrides": {"img_size": 32}}}}, "pretrain.model.overrides.img_size: fdsml sets img_size itself"),
        (
            {"retrieval": {"starts": [{"name": "s"}, {"name": "v", "backbone": "vit_tiny_patch4", "overrides": {"dpth": 6}}]}},
            "retrieval.starts[1].overrides.dpth: timm's vit_tiny_patch16_224 (VisionTransformer) takes no argument dpth (did you mean depth?)",
        ),
        ({"classification": {"starting_points": [{"name": "s", "overrides": {"drop_rat": 0.1}}]}}, "classification.starting_points[0].overrides.drop_rat: timm's resnet18 (ResNet) takes no argument drop_rat (did you mean drop_rate?)"),
        (
            {"tune": {"study": "t", "space": [{"key": "pretrain.optimizer.base_lr", "choices": [1]}], "arms": {"a": {"method": "x", "pretrain": {"model": {"overrides": {"drop_path_rat": 0.1}}}}}}},
            "tune.arms.a.pretrain.model.overrides.drop_path_rat: timm's resnet18 (ResNet) takes no argument drop_path_rat (did you mean drop_path_rate?)",
        ),
    ],
)
def test_an_unknown_key_at_any_depth_of_any_section_is_refused_naming_the_closest(parameters, named):
    with pytest.raises(RunCheckError) as raised:
        check_run(parameters, reads=set())  # sections the run does not read are held to their keys too
    assert named in str(raised.value) and raised.value.kind == "ConfigError"
    assert len(str(raised.value).splitlines()) == 1


def test_a_key_a_model_passes_on_to_its_blocks_is_told_from_a_misspelt_one():
    """RegNet passes **kwargs on to its configuration: se_ratio is taken, a misspelt name is not (tried on the meta device)."""
    check_run({"pretrain": {"model": {"backbone": "regnetx_002", "overrides": {"se_ratio": 0.25, "drop_path_rate": 0.1}}}}, reads=set())
    with pytest.raises(RunCheckError, match=r"pretrain.model.overrides.se_rati: timm's regnetx_002 \(RegNet\) takes no argument se_rati"):
        check_run({"pretrain": {"model": {"backbone": "regnetx_002", "overrides": {"se_rati": 0.25}}}}, reads=set())


@pytest.mark.parametrize("env", sorted(p.name for p in (ROOT / "conf").iterdir() if p.is_dir() and p.name not in ("local", "studies")))
def test_every_key_of_every_environment_is_known(env):
    from fdsml.plan import load_parameters

    check_run(load_parameters(env, [], ROOT / "conf"), reads=set())


def test_recall_at_k_beyond_what_a_query_searches_is_refused_naming_the_key_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the decode check's cache
    sop = tiny_sop(tmp_path)
    with pytest.raises(RunCheckError, match=r"retrieval.data.ks: \[1, 10, 100\] \(null: sop's own list\) asks for Recall@100, "
                       r"but a query of sop searches 5 items; set ks to Ks of at most 5, e\.g\. `retrieval: \{data: \{ks: \[1\]\}\}`"):
        check_run({"retrieval": {"data": {"dataset": "sop", "root": str(sop)}}})
    check_run({"retrieval": {"data": {"dataset": "sop", "root": str(sop), "ks": [1, 5], "batch_size": 3}}})


def test_a_test_split_of_one_image_is_refused_without_suggesting_a_k_that_cannot_fit_either(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the decode check's cache
    sop = tiny_sop(tmp_path, classes_per_split=1, images_per_class=1)
    with pytest.raises(RunCheckError, match=r"sop: a query searches no other image, so no Recall@K can be scored; give the test split") as raised:
        check_run({"retrieval": {"data": {"dataset": "sop", "root": str(sop), "ks": [1]}}})
    assert "ks: [1]" not in str(raised.value)


def test_a_starting_point_is_held_to_the_backbone_of_its_checkpoint_or_of_the_pre_training_that_writes_it(tmp_path):
    from fdsml.models import model_payload
    from fdsml.models.checkpoint import save_checkpoint
    from fdsml.models.network import build_model

    retrieval = {"starts": [{"name": "fdsml", "checkpoint": "pretrained_model", "backbone": "resnet18"}]}
    with pytest.raises(RunCheckError, match=r"'fdsml': the pre-training \(pretrain.model.backbone\) holds a vit_tiny_patch4 backbone"):
        check_run({"retrieval": retrieval, "pretrain": {"model": {"backbone": "vit_tiny_patch4"}}})
    check_run({"retrieval": retrieval, "pretrain": {"model": {"backbone": "resnet18"}}})
    stored = tmp_path / "pretrained_model.pt"
    save_checkpoint(stored, model_payload(build_model("vit_tiny_patch4", img_size=32)))
    with pytest.raises(RunCheckError, match=rf"'fdsml': {stored} holds a vit_tiny_patch4 backbone, but backbone: resnet18 was asked for"):
        check_run({"retrieval": retrieval, "pretrain": {"model": {"backbone": "resnet18"}}}, pretrained_model=str(stored))
    classification = {"starting_points": [{"name": "mine", "checkpoint": str(stored), "backbone": "resnet18"}]}
    with pytest.raises(RunCheckError, match=rf"'mine': {stored} holds a vit_tiny_patch4 backbone"):
        check_run({"classification": classification})


def test_the_plan_command_refuses_an_unknown_key(capsys):
    from fdsml.plan import main

    assert main(["--pipelines", "pretrain", "--params", "pretan.train.max_steps=6"]) == 2
    assert "pretan: unknown parameter section; did you mean pretrain.train.max_steps?" in capsys.readouterr().err


def test_a_plan_that_cannot_train_is_refused_before_work(tmp_path):
    sop = tiny_sop(tmp_path)
    with pytest.raises(RunCheckError, match=r"a batch of 90 is larger than the 6 training images.*retrieval.data.batch_size"):
        check_run({"retrieval": {"data": {"dataset": "sop", "root": str(sop), "ks": [1], "batch_size": 90}}})
    with pytest.raises(RunCheckError, match=r"pretrain at 1 replica\(s\): the warm-up \(1000 steps\) is not shorter than training \(12 steps\)"):
        check_run({"fractals": {}, "pretrain": {"optimizer": {"schedule": "warmup_cosine", "warmup_steps": 1000}, "validation": {"probe": None}}})


def test_one_problem_two_sections_find_is_said_once(tmp_path):
    absent = str(tmp_path / "absent")
    with pytest.raises(RunCheckError) as raised:
        check_run({"pretrain": {"validation": {"probe": {"dataset": "cub", "root": absent}}}, "retrieval": {"data": {"dataset": "cub", "root": absent}}})
    assert str(raised.value).count(absent) == 1 and "rank" not in str(raised.value)


def test_every_classification_dataset_s_problem_is_said_at_once(tmp_path):
    datasets = [{"name": "cifar10", "root": str(tmp_path / "a")}, {"name": "digits", "root": None}, {"name": "cifar100", "root": str(tmp_path / "b")}]
    with pytest.raises(RunCheckError) as raised:
        check_run({"classification": {"datasets": datasets}})
    message = str(raised.value)
    assert f"{tmp_path}/a not found" in message and f"{tmp_path}/b not found" in message and raised.value.kind == "DatasetLayoutError"


def test_a_test_class_of_one_image_is_said_before_work_not_refused(tmp_path, caplog, monkeypatch):
    from tests.own_images import write_image_folder

    monkeypatch.chdir(tmp_path)  # the decode check's cache
    folder = write_image_folder(tmp_path / "birds", classes=4, per_class=3)
    for image in sorted((folder / "class_02").iterdir())[1:]:
        image.unlink()
    with caplog.at_level("WARNING", logger="fdsml.pipelines.run_checks"):
        check_run({"retrieval": {"data": {"dataset": "imagefolder", "root": str(folder), "ks": [1, 2], "batch_size": 6}}}, reads={"retrieval"})
    assert "imagefolder-birds: 1 of 4 queries have no other image of their class to find" in caplog.text


def test_a_test_image_copied_under_another_name_or_from_training_stops_the_run_before_work(tmp_path, monkeypatch):
    import shutil

    from tests.own_images import write_image_folder

    monkeypatch.chdir(tmp_path)  # the decode check's cache
    folder = write_image_folder(tmp_path / "birds", classes=4, per_class=3)
    params = {"retrieval": {"data": {"dataset": "imagefolder", "root": str(folder), "ks": [1, 2], "batch_size": 6}}}
    check_run(params, reads={"retrieval"})
    shutil.copy(folder / "class_03" / "0.png", folder / "class_03" / "0 copy.png")  # the query finds it at distance 0
    with pytest.raises(RunCheckError, match=r"imagefolder-birds: pixel-identical copies among the scored images or of a training image \(1: test class_03/0 copy.png = test class_03/0.png\)"):
        check_run(params, reads={"retrieval"})
    (folder / "class_03" / "0 copy.png").unlink()
    shutil.copy(folder / "class_00" / "1.png", folder / "class_02" / "9.png")  # a training image among the test images
    with pytest.raises(RunCheckError, match=r"\(1: train class_00/1.png = test class_02/9.png\); .*delete the copies") as raised:
        check_run(params, reads={"retrieval"})
    assert raised.value.kind == "DatasetLayoutError"
    for index in range(3, 5):  # enough images for a drawn 20 % test split to hold every class
        for klass in range(4):
            shutil.copy(folder / f"class_{klass:02d}" / "0.png", folder / f"class_{klass:02d}" / f"{index}.png")
    classification = {"classification": {"datasets": [{"name": "imagefolder", "root": str(folder)}], "batch_size": 4}}
    with pytest.raises(RunCheckError, match=r"imagefolder: pixel-identical copies among the scored images or of a training image \(\d+: "):
        check_run(classification, reads={"classification"})
