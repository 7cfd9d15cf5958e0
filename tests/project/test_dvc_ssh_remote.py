"""A team's DVC remote on a real SSH server: Debian's OpenSSH on 127.0.0.1 (host and user keys made here,
sshd started with its own configuration) and dvc-ssh, over the project's chain (tiny parameters).

One clone pushes every output, the server going down half-way through the first push; the push run
again completes, nothing in the cache or on the remote is corrupt; a second clone pulls, finds
nothing out of date and has nothing to reproduce. A checkpoint swapped on the remote is refused by the
pull (a remote with DVC's ``verify``) or, pulled from one without it, by the run that would use it.
"""

import hashlib
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.dependencies import require_module
from tests.dvc_chain import copy_of_chain, dvc_env, output_paths, run_checked, stages_ran
from tests.fresh_clone import BIN
from tests.servers import SshServer

pytestmark = pytest.mark.slow
PUSH_TIMEOUT_S = 600
MODEL = "data/06_models/pretrained_model.pt"


OBJECT_NAME = re.compile(r"[0-9a-f]{30}(\.dir)?")
"""An object's file name (the md5's last 30 digits; the first two name its folder). DVC uploads under a
temporary name (``<name>.<random>.tmp``) and renames the file once complete."""


def _objects(cache: Path) -> dict[str, Path]:
    """The content-addressed files of a DVC cache or remote (``files/md5/ab/cdef...``), by their md5."""
    files = (cache / "files/md5").glob("??/*")
    return {f"{path.parent.name}{path.name.removesuffix('.dir')}": path for path in files if OBJECT_NAME.fullmatch(path.name)}


def _corrupt(cache: Path) -> list[str]:
    """Objects whose bytes do not hash to their name (a partial upload would be one)."""
    return sorted(name for name, path in _objects(cache).items() if hashlib.md5(path.read_bytes()).hexdigest() != name)


@pytest.fixture(scope="module")
def ssh(tmp_path_factory):
    """The server, and a home folder holding its host key in ``.ssh/known_hosts`` (a team member's machine)."""
    require_module("dvc_ssh", "DVC's SSH remote is not installed: pip install -e '.[team]'")
    folder = tmp_path_factory.mktemp("ssh")
    server = SshServer(folder)
    server.start()
    home = folder / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(server.known_hosts, home / ".ssh/known_hosts")
    yield server, {"HOME": str(home)}
    server.stop()


@pytest.fixture(scope="module")
def pushed(ssh, built_tiny_chain, tmp_path_factory):
    """The first clone after ``dvc repro`` and a push cut half-way by the server stopping, then run again:
    the clone, the remote's folder and what the cut push left."""
    server, env = ssh
    base = tmp_path_factory.mktemp("team")
    alice, remote = base / "alice", base / "remote"
    alice.mkdir()
    copy_of_chain(built_tiny_chain[0], alice)
    run_checked(["dvc", "remote", "add", "-d", "team", f"ssh://{server.user}@127.0.0.1:{server.port}{remote}"], alice, env)
    run_checked(["dvc", "remote", "modify", "--local", "team", "keyfile", str(server.user_key)], alice, env)
    run_checked(["git", "add", "-A"], alice)  # dvc.lock of this repro and the remote's address (outputs are git-ignored)
    run_checked(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "outputs, SSH remote"], alice)

    push = subprocess.Popen([str(BIN / "dvc"), "push"], cwd=alice, env=dvc_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + PUSH_TIMEOUT_S
    while not _objects(remote) and push.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    server.stop()  # half-way: the first objects are there
    cut = {"running_when_cut": push.poll() is None, "output": push.communicate(timeout=PUSH_TIMEOUT_S)[0],
           "returncode": push.returncode, "objects": len(_objects(remote)), "corrupt": _corrupt(remote),
           "partial": sorted(path.name for path in remote.glob("files/md5/??/*.tmp"))}
    server.start()
    run_checked(["dvc", "push"], alice, env)
    return alice, remote, cut


def test_a_push_cut_by_the_server_going_down_completes_when_run_again(pushed, ssh):
    alice, remote, cut = pushed
    _, env = ssh
    local = _objects(alice / ".dvc/cache")
    assert cut["running_when_cut"] and cut["returncode"] != 0, cut["output"][-3000:]
    assert 0 < cut["objects"] < len(local), "the server went down half-way"
    assert cut["corrupt"] == [], "a cut upload leaves no partial object under an object's name"
    assert _corrupt(alice / ".dvc/cache") == [] and _corrupt(remote) == []
    assert set(_objects(remote)) == set(local)
    print(f"cut after {cut['objects']} of {len(local)} objects; partial uploads left under temporary names: {cut['partial']}")
    assert "Cache and remote 'team' are in sync" in run_checked(["dvc", "status", "-c"], alice, env)


def test_a_second_clone_pulls_every_output_and_has_nothing_to_reproduce(pushed, ssh, tmp_path):
    alice, _, _ = pushed
    server, env = ssh
    bob = tmp_path / "bob"
    run_checked(["git", "clone", "-q", str(alice), str(bob)], tmp_path)
    assert not any(path.exists() for path in output_paths(bob))
    run_checked(["dvc", "remote", "modify", "--local", "team", "keyfile", str(server.user_key)], bob, env)
    run_checked(["dvc", "pull"], bob, env)
    assert all(path.exists() for path in output_paths(bob))
    assert "Data and pipelines are up to date" in run_checked(["dvc", "status"], bob, env)
    assert stages_ran(run_checked(["dvc", "repro"], bob, env)) == set()
    assert _corrupt(bob / ".dvc/cache") == []


def _swapped_remote(remote: Path, folder: Path, alice: Path) -> Path:
    """A copy of the team's remote in which the pre-trained model's object holds another, well-formed checkpoint
    (other weights, the same format and metadata): what someone with write access to the remote could leave there."""
    import torch

    swapped = folder / "swapped-remote"
    shutil.copytree(remote, swapped)
    (locked,) = [out["md5"] for stage in yaml.safe_load((alice / "dvc.lock").read_text())["stages"].values()
                 for out in stage.get("outs", []) if out["path"] == MODEL]
    payload = torch.load(alice / MODEL, weights_only=True)
    payload["state_dict"] = {name: tensor + 1 if tensor.is_floating_point() else tensor for name, tensor in payload["state_dict"].items()}
    forged = folder / "forged.pt"
    torch.save(payload, forged)
    target = swapped / "files/md5" / locked[:2] / locked[2:]
    target.chmod(0o644)
    shutil.copyfile(forged, target)
    return swapped


@pytest.mark.parametrize("verify", [True, False], ids=["the-pull-refuses", "the-run-refuses"])
def test_a_checkpoint_swapped_on_the_remote_is_refused_by_the_pull_or_by_the_run(pushed, ssh, tmp_path, verify):
    alice, remote, _ = pushed
    server, env = ssh
    swapped = _swapped_remote(remote, tmp_path, alice)
    bob = tmp_path / "bob"
    run_checked(["git", "clone", "-q", str(alice), str(bob)], tmp_path)
    run_checked(["dvc", "remote", "add", "--local", "-d", "swapped", f"ssh://{server.user}@127.0.0.1:{server.port}{swapped}"], bob, env)
    run_checked(["dvc", "remote", "modify", "--local", "swapped", "keyfile", str(server.user_key)], bob, env)
    if verify:  # as docs/teams.md sets every remote up
        run_checked(["dvc", "remote", "modify", "--local", "swapped", "verify", "true"], bob, env)
    pulled = subprocess.run([str(BIN / "dvc"), "pull"], cwd=bob, env=dvc_env(env), capture_output=True, text=True)
    if verify:
        assert pulled.returncode != 0 and MODEL in pulled.stdout + pulled.stderr, pulled.stdout[-3000:]
        assert not (bob / MODEL).exists(), "the swapped file never reaches the workspace"
        return
    assert pulled.returncode == 0 and (bob / MODEL).read_bytes() == (tmp_path / "forged.pt").read_bytes()  # DVC took it as is
    pulled_files = _stamps(bob / "data")
    used = subprocess.run([str(BIN / "kedro"), "run", "--pipelines=export"], cwd=bob, env=dvc_env(env), capture_output=True, text=True)
    output = " ".join((used.stdout + used.stderr).split())  # the console wraps its warnings
    assert used.returncode == 1 and f"{MODEL}: its bytes are not the ones recorded when it was written (dvc.lock)" in output, output[-3000:]
    assert "DVC remote 'swapped' does not verify what it pulls" in output
    assert _stamps(bob / "data") == pulled_files, "the run wrote nothing"


def _stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time."""
    return {str(path): (path.stat().st_size, path.stat().st_mtime_ns) for path in folder.rglob("*") if path.is_file()}
