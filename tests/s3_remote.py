"""A team's DVC remote on a real S3-compatible server (moto on loopback), configured as the team does:
the endpoint committed, the credentials in ``.dvc/config.local`` only. The server is the ``s3`` fixture
of tests/conftest.py."""

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

from tests.fresh_clone import BIN

BUCKET = "fdsml-team"
KEY_ID, SECRET = "teamkey", "not-in-git-7f3a9c"
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


def run_as_team(args, cwd, ok=True) -> subprocess.CompletedProcess:
    """``args`` run in ``cwd`` in :data:`ENV`; unless ``ok`` is False, the test fails showing what a failed command printed."""
    result = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True)
    if ok:
        assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def use_s3_remote(repo: Path, endpoint: str) -> None:
    """The shared part of the remote (committed) and this person's credentials (local only)."""
    run_as_team(["dvc", "remote", "add", "-f", "-d", "team", f"s3://{BUCKET}/cache"], repo)
    run_as_team(["dvc", "remote", "modify", "team", "endpointurl", endpoint], repo)
    run_as_team(["dvc", "remote", "modify", "--local", "team", "access_key_id", KEY_ID], repo)
    run_as_team(["dvc", "remote", "modify", "--local", "team", "secret_access_key", SECRET], repo)


@contextmanager
def s3_server(folder: Path) -> Iterator[tuple[str, object]]:
    """A moto S3 server on a free loopback port with the team's bucket: its endpoint and a boto3 client;
    ``folder`` holds the empty AWS configuration :data:`ENV` points at."""
    empty = folder / "empty"
    empty.write_text("")
    ENV.update(AWS_CONFIG_FILE=str(empty), AWS_SHARED_CREDENTIALS_FILE=str(empty))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
        client.create_bucket(Bucket=BUCKET)
        yield endpoint, client
    finally:
        server.stop()
