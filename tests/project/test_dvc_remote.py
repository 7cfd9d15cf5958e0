"""A team through a real S3 remote: an S3-compatible server on loopback (moto), a bare git remote.

One person runs a stage (a tiny one: the protocol under test is DVC's, the project's own stages
are covered by tests/test_dvc.py) and pushes; a colleague clones, pulls and gets every output
byte for byte, with the credentials only in ``.dvc/config.local``. An experiment goes through
``dvc exp push`` / ``dvc exp pull`` and shows up, with its outputs, on the colleague's side.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml
from moto.server import ThreadedMotoServer

BIN = Path(sys.executable).parent
BUCKET = "fdsml-team"
KEY_ID, SECRET = "teamkey", "not-in-git-7f3a9c"
STAGE = "render"
SCRIPT = """
import json, pathlib, random, yaml
seed = yaml.safe_load(open("params.yaml"))["render"]["seed"]
rng, out = random.Random(seed), pathlib.Path("data/images")
out.mkdir(parents=True, exist_ok=True)
for i in range(3):
    (out / f"{i}.bin").write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
json.dump({"mean_byte": sum((out / "0.bin").read_bytes()) / 4096}, open("data/summary.json", "w"))
"""
DVC_YAML = {
    "stages": {
        STAGE: {
            "cmd": "python render.py",
            "deps": ["render.py"],
            "params": ["render"],
            "outs": ["data/images"],
            "metrics": ["data/summary.json"],
        }
    }
}
# No credentials from the environment or ~/.aws: whatever reaches the server comes from .dvc/config.local.
ENV = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {
    "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    "KEDRO_DISABLE_TELEMETRY": "1",
    "DVC_NO_ANALYTICS": "1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def _run(args, cwd, ok=True):
    result = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True)
    if ok:
        assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _outputs(folder: Path) -> list[Path]:
    stage = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"][STAGE]
    return [folder / (e if isinstance(e, str) else next(iter(e))) for kind in ("outs", "metrics") for e in stage.get(kind, [])]


def _digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under the stage's outputs, by path relative to ``folder``."""
    files = [f for out in _outputs(folder) for f in ([out] if out.is_file() else sorted(out.rglob("*"))) if f.is_file()]
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def _use_s3_remote(repo: Path, endpoint: str) -> None:
    """The shared part of the remote (committed) and this person's credentials (local only)."""
    _run(["dvc", "remote", "add", "-f", "-d", "team", f"s3://{BUCKET}/cache"], repo)
    _run(["dvc", "remote", "modify", "team", "endpointurl", endpoint], repo)
    _run(["dvc", "remote", "modify", "--local", "team", "access_key_id", KEY_ID], repo)
    _run(["dvc", "remote", "modify", "--local", "team", "secret_access_key", SECRET], repo)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    empty = tmp_path_factory.mktemp("aws") / "empty"
    empty.write_text("")
    ENV.update(AWS_CONFIG_FILE=str(empty), AWS_SHARED_CREDENTIALS_FILE=str(empty))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    client.create_bucket(Bucket=BUCKET)
    yield endpoint, client
    server.stop()


@pytest.fixture(scope="module")
def team(s3, tmp_path_factory):
    """The first person's repository after ``dvc repro`` and ``dvc push``, and the bare git remote."""
    endpoint, _ = s3
    base = tmp_path_factory.mktemp("team")
    origin, alice = base / "origin.git", base / "alice"
    alice.mkdir()
    (alice / "render.py").write_text(SCRIPT)
    (alice / "params.yaml").write_text(yaml.safe_dump({"render": {"seed": 0}}))
    (alice / "dvc.yaml").write_text(yaml.safe_dump(DVC_YAML))
    _run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], base)
    _run(["git", "init", "-q", "-b", "main"], alice)
    _run(["dvc", "init", "-q"], alice)
    _use_s3_remote(alice, endpoint)
    _run(["dvc", "repro"], alice)
    _run(["git", "add", "-A"], alice)
    _run(["git", "commit", "-qm", "render stage, S3 remote"], alice)
    _run(["git", "remote", "add", "origin", str(origin)], alice)
    _run(["git", "push", "-q", "origin", "main"], alice)
    _run(["dvc", "push"], alice)
    return base, origin, alice, endpoint


def _colleague(base: Path, origin: Path, name: str, endpoint: str) -> Path:
    clone = base / name
    _run(["git", "clone", "-q", str(origin), str(clone)], base)
    _run(["dvc", "remote", "modify", "--local", "team", "access_key_id", KEY_ID], clone)
    _run(["dvc", "remote", "modify", "--local", "team", "secret_access_key", SECRET], clone)
    return clone


def test_a_fresh_clone_pulls_every_output_byte_for_byte_from_s3(team, s3):
    base, origin, alice, endpoint = team
    _, client = s3
    assert client.list_objects_v2(Bucket=BUCKET, Prefix="cache/")["KeyCount"] > 0
    bob = _colleague(base, origin, "bob", endpoint)
    assert not any(path.exists() for path in _outputs(bob))
    _run(["dvc", "pull"], bob)
    assert _digests(bob) == _digests(alice) and len(_digests(bob)) == 4
    assert "Cache and remote 'team' are in sync" in _run(["dvc", "status", "-c"], bob).stdout


def test_credentials_stay_in_config_local_and_out_of_git(team):
    base, origin, alice, endpoint = team
    assert SECRET in (alice / ".dvc/config.local").read_text()
    assert ".dvc/config.local" not in _run(["git", "ls-files"], alice).stdout.splitlines()
    committed = _run(["git", "show", "HEAD:.dvc/config"], alice).stdout
    assert endpoint in committed and SECRET not in committed and KEY_ID not in committed
    assert SECRET not in _run(["git", "log", "--all", "-p"], alice).stdout
    stranger = base / "stranger"  # a clone without credentials cannot read the bucket
    _run(["git", "clone", "-q", str(origin), str(stranger)], base)
    refused = _run(["dvc", "pull"], stranger, ok=False)
    assert refused.returncode != 0 and not any(path.exists() for path in _outputs(stranger))


def test_an_experiment_travels_through_exp_push_and_exp_pull(team):
    base, origin, alice, endpoint = team
    before = _digests(alice)
    _run(["dvc", "exp", "run", "-n", "seed-7", "-S", "render.seed=7"], alice)
    experiment = _digests(alice)
    assert experiment != before
    summary = json.loads((alice / "data/summary.json").read_text())
    _run(["dvc", "exp", "push", "origin", "seed-7"], alice)

    carol = _colleague(base, origin, "carol", endpoint)
    _run(["dvc", "exp", "pull", "origin", "seed-7"], carol)
    table = _run(["dvc", "exp", "show", "--csv"], carol).stdout.splitlines()
    header, row = table[0].split(","), next(line for line in table if line.startswith("seed-7,")).split(",")
    assert row[header.index("render.seed")] == "7"
    assert float(row[header.index("mean_byte")]) == pytest.approx(summary["mean_byte"])
    _run(["dvc", "exp", "apply", "seed-7"], carol)
    assert _digests(carol) == experiment
