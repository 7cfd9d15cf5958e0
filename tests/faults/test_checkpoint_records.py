"""A checkpoint is used only when its bytes are the ones recorded apart from it: the digest beside it, written with it,
or the MD5 dvc.lock records; a file swapped since (its own fingerprint and format intact) is refused before any reuse,
resume or load, and a file from elsewhere is used with a warning. A checkpoint's model settings reach timm only
when they are ones fdsml writes."""

import logging
import shutil

import pytest
import torch
import yaml

from fdsml import atomic
from fdsml.errors import CheckpointError
from fdsml.integrity import file_digest, record_path, recorded_digests
from fdsml.models import build_model
from fdsml.models.checkpoint import load_checkpoint_file, model_payload, save_checkpoint
from fdsml.models.starting_points import StartingPoint, build_from_start
from fdsml.training.pretrain import pretrain
from fdsml.training.run_folders import list_runs
from tests.support import TINY_SPEC
from tests.training.helpers import tiny_config


def _model_file(path, seed: int):
    torch.manual_seed(seed)
    save_checkpoint(path, model_payload(build_model("resnet18", embedding_dim=8, img_size=32)))
    return path


def test_a_checkpoint_whose_bytes_changed_since_it_was_written_is_refused(tmp_path):
    mine, other = _model_file(tmp_path / "mine.pt", 0), _model_file(tmp_path / "other.pt", 1)
    assert recorded_digests(mine) == {file_digest(mine)}
    load_checkpoint_file(mine)
    shutil.copyfile(other, mine)  # a whole, valid fdsml checkpoint: only its record tells it is not this file
    with pytest.raises(CheckpointError, match=r"mine.pt: its bytes are not the ones recorded when it was written \(mine.pt.sha256\)"):
        load_checkpoint_file(mine)
    load_checkpoint_file(other)


def test_a_forged_run_checkpoint_is_neither_reused_nor_resumed(tiny_table, tmp_path):
    config = tiny_config(tmp_path, train={"max_steps": 2})
    pretrain(tiny_table, TINY_SPEC, config)
    [run] = list_runs(tmp_path)
    state = torch.load(run.path / "last.pt", weights_only=True)
    state["state_dict"] = {name: tensor + 1 if tensor.is_floating_point() else tensor for name, tensor in state["state_dict"].items()}
    torch.save(state, run.path / "last.pt")  # the run's own fingerprint, step and format: forged weights
    with pytest.raises(CheckpointError, match="last.pt: its bytes are not the ones recorded"):
        pretrain(tiny_table, TINY_SPEC, config)


def test_a_save_cut_before_its_rename_leaves_a_file_its_record_still_vouches_for(tmp_path, monkeypatch):
    path = _model_file(tmp_path / "model.pt", 0)
    before = path.read_bytes()

    replace = atomic.os.replace

    def cut(source, target):  # the checkpoint's own rename fails, as if the run were killed just before it
        if target == path:
            raise OSError("the run was killed here")
        replace(source, target)

    monkeypatch.setattr(atomic.os, "replace", cut)
    with pytest.raises(OSError, match="killed"):
        _model_file(path, 1)
    monkeypatch.undo()
    assert path.read_bytes() == before and len(recorded_digests(path)) == 2  # the old file and the one being written
    load_checkpoint_file(path)
    _model_file(path, 1)
    assert recorded_digests(path) == {file_digest(path)}  # a finished save records its file alone


def _dvc_lock(project, path, md5: str) -> None:
    lock = {"schema": "2.0", "stages": {"pretrain": {"cmd": "kedro run", "outs": [{"path": str(path.relative_to(project)), "md5": md5}]}}}
    (project / "dvc.lock").write_text(yaml.safe_dump(lock))


def test_a_pulled_file_matching_dvc_lock_is_accepted_over_a_stale_record_and_one_matching_neither_refused(tmp_path):
    model = tmp_path / "data/06_models/pretrained_model.pt"
    model.parent.mkdir(parents=True)
    _model_file(model, 0)  # a local run's file and record
    pulled = _model_file(tmp_path / "pulled.pt", 1)
    _dvc_lock(tmp_path, model, file_digest(pulled, "md5"))
    shutil.copyfile(pulled, model)  # what `dvc pull` puts there: dvc.lock's file; the sidecar is the local run's
    load_checkpoint_file(model)
    record_path(model).unlink()
    load_checkpoint_file(model)  # no sidecar at all: dvc.lock vouches for it
    shutil.copyfile(_model_file(tmp_path / "swapped.pt", 2), model)
    with pytest.raises(CheckpointError, match=r"pretrained_model.pt: its bytes are not the ones recorded .*\(dvc.lock\)"):
        load_checkpoint_file(model)


def test_a_checkpoint_nothing_records_is_used_with_a_warning(tmp_path, caplog):
    path = _model_file(tmp_path / "from_elsewhere.pt", 0)
    record_path(path).unlink()
    with caplog.at_level(logging.WARNING, logger="fdsml.integrity"):
        load_checkpoint_file(path)
    assert "from_elsewhere.pt: no digest of it is recorded" in caplog.text


@pytest.mark.parametrize("setting", ["checkpoint_path", "pretrained_cfg_overlay", "device"])
def test_model_settings_fdsml_never_writes_never_reach_timm(tmp_path, setting):
    """``checkpoint_path`` once made timm open a file of the checkpoint's choosing."""
    bait = tmp_path / "chosen_by_the_checkpoint.pth"
    torch.save({}, bait)
    payload = model_payload(build_model("resnet18", embedding_dim=8, img_size=32))
    payload["model"][setting] = {"file": str(bait)} if setting == "pretrained_cfg_overlay" else str(bait)
    save_checkpoint(tmp_path / "model.pt", payload)  # its record is intact: the settings, not the bytes, are the fault
    with pytest.raises(CheckpointError, match=f"model.pt: its model settings hold '{setting}', which fdsml never writes"):
        build_from_start(StartingPoint("fdsml", str(tmp_path / "model.pt")), seed=0, embedding_dim=8)
