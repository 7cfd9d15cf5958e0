"""Servers a team runs, started for real by the tests on 127.0.0.1: a throw-away PostgreSQL cluster, an SSH server,
kedro-viz (as ``make viz`` starts it).

Each lives in its own temporary folder and is stopped (and the folder removed) by its owner. Debian's
packages provide them (`.ci/run` installs them); without one a test is skipped, or fails in CI
(:mod:`tests.dependencies`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.dependencies import require_program

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")  # Debian 12's postgresql (15): not on PATH
POSTGRES_HINT = "PostgreSQL 15 is not installed: apt-get install -y postgresql (Debian 12)"
START_TIMEOUT_S = 60


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_owner(owner: str | None) -> list[str]:
    """The prefix running a command as ``owner`` (root cannot run initdb), or none when not root."""
    return ["runuser", "-u", owner, "--"] if owner else []


class PostgresServer:
    """A PostgreSQL cluster of its own on 127.0.0.1 (password login, scram-sha-256), in a temporary folder."""

    user = "tuner"
    password = "team-secret-3b9e"

    def __init__(self):
        initdb = require_program("initdb", POSTGRES_HINT, POSTGRES_BIN)
        self.owner = "postgres" if os.geteuid() == 0 else None  # Debian's package makes the postgres user
        self.folder = Path(tempfile.mkdtemp(prefix="fdsml-pg-"))  # short: its socket path must fit in 107 bytes
        self.data = self.folder / "data"
        self.port = free_port()
        password_file = self.folder / "password"
        password_file.write_text(self.password + "\n")
        if self.owner:
            shutil.chown(self.folder, self.owner)
            shutil.chown(password_file, self.owner)
        self._run(initdb, "-D", str(self.data), "-U", self.user, f"--pwfile={password_file}", "--auth=scram-sha-256",
                  "-E", "UTF8", "--no-sync")
        password_file.unlink()

    def _run(self, *command: str) -> str:
        done = subprocess.run([*_as_owner(self.owner), *command], capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return done.stdout

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder}"
        self._run(str(POSTGRES_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"),
                  "-o", options, "-w", "-t", str(START_TIMEOUT_S), "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: sessions cut, then a clean shutdown; ``immediate``: as if it crashed)."""
        self._run(str(POSTGRES_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str, password: str | None = None) -> str:
        return f"postgresql://{self.user}:{password or self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database ``name`` (what a team's administrator runs once); its URL."""
        import psycopg  # the team extra's driver

        # autocommit: CREATE DATABASE refuses to run inside a transaction
        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        """Stop the server if it runs and delete its folder."""
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.folder)


def stop_group(process: subprocess.Popen) -> None:
    """Stop the process and every child it started (they share its process group)."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


SSHD = Path("/usr/sbin/sshd")  # Debian's openssh-server
SSH_HINT = "OpenSSH's server is not installed: apt-get install -y openssh-server (Debian)"


def _children(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (sshd's per-connection processes leave its process group)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):  # a process that ended while listed
            continue
        if parent == pid:
            child = int(stat.parent.name)
            found += [child, *_children(child)]
    return found


class SshServer:
    """OpenSSH's sshd on 127.0.0.1 with its own configuration, host key and one user key, all made here.

    ``known_hosts`` and ``user_key`` are what a team member's machine holds for the server; only this user may log in.
    """

    def __init__(self, folder: Path):
        require_program("sshd", SSH_HINT, SSHD.parent)
        keygen = require_program("ssh-keygen", SSH_HINT)
        self.folder = folder
        self.port = free_port()
        self.user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
        self.host_key, self.user_key = folder / "host_key", folder / "user_key"
        for key in (self.host_key, self.user_key):
            subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=START_TIMEOUT_S)
        (folder / "authorized_keys").write_text(Path(f"{self.user_key}.pub").read_text())
        host_public = Path(f"{self.host_key}.pub").read_text().split()[:2]
        self.known_hosts = folder / "known_hosts"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {' '.join(host_public)}\n")
        self.config = folder / "sshd_config"
        self.config.write_text("\n".join([
            "ListenAddress 127.0.0.1", f"Port {self.port}", f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {folder / 'authorized_keys'}", f"AllowUsers {self.user}", f"PidFile {folder / 'sshd.pid'}",
            "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "PermitRootLogin prohibit-password", "StrictModes no", "Subsystem sftp internal-sftp", "LogLevel ERROR", "",
        ]))
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # its privilege separation folder (systemd makes it at boot)
        log = open(self.folder / "sshd.log", "a")
        self.process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(self.config)], stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self.process.poll() is None, (self.folder / "sshd.log").read_text()
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            assert time.monotonic() < deadline, f"sshd did not listen on 127.0.0.1:{self.port} within {START_TIMEOUT_S} s"
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server and cut every open session at once, as a server going down does."""
        for pid in [self.process.pid, *_children(self.process.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()


VIZ_MAX_PORT = 49151
VIZ_STARTUP_TIMEOUT_S = 120
VIZ_COMMAND = ("viz", "run", "--env", "base", "--no-browser", "--host", "127.0.0.1")
"""``make viz`` (the Makefile's target) without its port."""


def viz_port() -> int:
    """A free loopback port that kedro-viz accepts: it refuses ports above 49151."""
    for _ in range(100):
        port = free_port()
        if port <= VIZ_MAX_PORT:
            return port
    raise RuntimeError(f"no free loopback port at or below {VIZ_MAX_PORT}")


def _viz_address(log_text: str) -> str | None:
    """The address kedro-viz announces: it moves to the next port when the one asked for is taken."""
    match = re.search(r"running at\s+(http://127\.0\.0\.1:\d+)", log_text)
    return match.group(1) if match else None


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@contextlib.contextmanager
def viz_server(project: Path, log_path: Path, env: dict[str, str]) -> Iterator[str]:
    """``make viz``'s server on ``project``, in a process group of its own (its web server is a child): its address."""
    port = viz_port()
    with log_path.open("w") as log:
        kedro = str(Path(sys.executable).parent / "kedro")
        server = subprocess.Popen([kedro, *VIZ_COMMAND, "--port", str(port)], cwd=project, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + VIZ_STARTUP_TIMEOUT_S
        while True:
            url = _viz_address(log_path.read_text())
            try:
                if url is not None:
                    get_json(f"{url}/api/main")
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"kedro viz (asked for port {port}) did not answer:\n{log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        stop_group(server)
