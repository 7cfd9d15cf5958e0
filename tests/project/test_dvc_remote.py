"""A team through a real S3 remote: an S3-compatible server on loopback (moto), a bare git remote.

One person runs a stage (a tiny one: the protocol under test is DVC's, the project's own stages
are covered by tests/project/test_dvc.py) and pushes; a colleague clones, pulls and gets every output
byte for byte, with the credentials only in ``.dvc/config.local``. An experiment goes through
``dvc exp push`` / ``dvc exp pull`` and shows up, with its outputs, on the colleague's side.
"""

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from tests.s3_remote import BUCKET, KEY_ID, SECRET, run_as_team, use_s3_remote

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


def _outputs(folder: Path) -> list[Path]:
    stage = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"][STAGE]
    return [folder / (e if isinstance(e, str) else next(iter(e))) for kind in ("outs", "metrics") for e in stage.get(kind, [])]


def _digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under the stage's outputs, by path relative to ``folder``."""
    files = [f for out in _outputs(folder) for f in ([out] if out.is_file() else sorted(out.rglob("*"))) if f.is_file()]
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


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
    run_as_team(["git", "init", "-q", "--bare", "-b", "main", str(origin)], base)
    run_as_team(["git", "init", "-q", "-b", "main"], alice)
    run_as_team(["dvc", "init", "-q"], alice)
    use_s3_remote(alice, endpoint)
    run_as_team(["dvc", "repro"], alice)
    run_as_team(["git", "add", "-A"], alice)
    run_as_team(["git", "commit", "-qm", "render stage, S3 remote"], alice)
    run_as_team(["git", "remote", "add", "origin", str(origin)], alice)
    run_as_team(["git", "push", "-q", "origin", "main"], alice)
    run_as_team(["dvc", "push"], alice)
    return base, origin, alice, endpoint


def _colleague(base: Path, origin: Path, name: str, endpoint: str) -> Path:
    clone = base / name
    run_as_team(["git", "clone", "-q", str(origin), str(clone)], base)
    run_as_team(["dvc", "remote", "modify", "--local", "team", "access_key_id", KEY_ID], clone)
    run_as_team(["dvc", "remote", "modify", "--local", "team", "secret_access_key", SECRET], clone)
    return clone


def test_a_fresh_clone_pulls_every_output_byte_for_byte_from_s3(team, s3):
    base, origin, alice, endpoint = team
    _, client = s3
    assert client.list_objects_v2(Bucket=BUCKET, Prefix="cache/")["KeyCount"] > 0
    bob = _colleague(base, origin, "bob", endpoint)
    assert not any(path.exists() for path in _outputs(bob))
    run_as_team(["dvc", "pull"], bob)
    assert _digests(bob) == _digests(alice) and len(_digests(bob)) == 4
    assert "Cache and remote 'team' are in sync" in run_as_team(["dvc", "status", "-c"], bob).stdout


def test_credentials_stay_in_config_local_and_out_of_git(team):
    base, origin, alice, endpoint = team
    assert SECRET in (alice / ".dvc/config.local").read_text()
    assert ".dvc/config.local" not in run_as_team(["git", "ls-files"], alice).stdout.splitlines()
    committed = run_as_team(["git", "show", "HEAD:.dvc/config"], alice).stdout
    assert endpoint in committed and SECRET not in committed and KEY_ID not in committed
    assert SECRET not in run_as_team(["git", "log", "--all", "-p"], alice).stdout
    stranger = base / "stranger"  # a clone without credentials cannot read the bucket
    run_as_team(["git", "clone", "-q", str(origin), str(stranger)], base)
    refused = run_as_team(["dvc", "pull"], stranger, ok=False)
    assert refused.returncode != 0 and not any(path.exists() for path in _outputs(stranger))


@pytest.mark.slow  # a DVC experiment run, pushed and pulled: about 10 seconds (`make test` stays under 15 minutes; CI runs it)
def test_an_experiment_travels_through_exp_push_and_exp_pull(team):
    base, origin, alice, endpoint = team
    before = _digests(alice)
    run_as_team(["dvc", "exp", "run", "-n", "seed-7", "-S", "render.seed=7"], alice)
    experiment = _digests(alice)
    assert experiment != before
    summary = json.loads((alice / "data/summary.json").read_text())
    run_as_team(["dvc", "exp", "push", "origin", "seed-7"], alice)

    carol = _colleague(base, origin, "carol", endpoint)
    run_as_team(["dvc", "exp", "pull", "origin", "seed-7"], carol)
    table = run_as_team(["dvc", "exp", "show", "--csv"], carol).stdout.splitlines()
    header, row = table[0].split(","), next(line for line in table if line.startswith("seed-7,")).split(",")
    assert row[header.index("render.seed")] == "7"
    assert float(row[header.index("mean_byte")]) == pytest.approx(summary["mean_byte"])
    run_as_team(["dvc", "exp", "apply", "seed-7"], carol)
    assert _digests(carol) == experiment
