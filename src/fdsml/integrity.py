"""What a stored file is checked against before it is used: a digest recorded apart from it, never its own claims.

A checkpoint's fingerprint, format and weights are all inside the file, so a file swapped on a shared
remote or folder would vouch for itself. So fdsml records each file it writes by content, in a
sidecar beside it (``last.pt.sha256``: SHA-256 of the bytes, written when the file is), and a load
accepts the file only when its bytes match that record, or the MD5 that ``dvc.lock`` (in git) records
for it (a file DVC pulled, whose sidecar is an older run's or absent). A file neither vouches for is
used with a warning (a checkpoint from elsewhere); one they both refuse is refused.

DVC itself checks a pulled file against ``dvc.lock`` only on remotes with ``verify = true``:
:func:`unverified_remotes` names the configured ones without it, for the warning before a run.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from pathlib import Path

import yaml

from fdsml.atomic import atomic_path
from fdsml.errors import CheckpointError

logger = logging.getLogger(__name__)

RECORD_SUFFIX = ".sha256"
DVC_LOCK = "dvc.lock"


def record_path(path: str | os.PathLike) -> Path:
    """The sidecar recording ``path``'s content: ``<name>.sha256`` beside it."""
    path = Path(path)
    return path.with_name(path.name + RECORD_SUFFIX)


def recorded_digests(path: str | os.PathLike) -> set[str]:
    """The digests ``path``'s sidecar accepts (none without one)."""
    try:
        return set(record_path(path).read_text().split())
    except FileNotFoundError:
        return set()


def record_content(path: str | os.PathLike, digests: set[str]) -> None:
    """Write ``path``'s sidecar (atomically): its content may be any of ``digests``."""
    with atomic_path(record_path(path)) as temporary:
        temporary.write_text("".join(f"{digest}\n" for digest in sorted(digests)))


def dvc_locked_md5(path: str | os.PathLike) -> str | None:
    """The MD5 the nearest ``dvc.lock`` above ``path`` records for it as a stage output (None: it records none)."""
    path = Path(path).resolve()
    for folder in path.parents:
        lock = folder / DVC_LOCK
        if lock.is_file():
            stat = lock.stat()
            return _locked_outputs(str(lock), stat.st_mtime_ns, stat.st_size).get(path.relative_to(folder).as_posix())
    return None


@functools.lru_cache(maxsize=4)
def _locked_outputs(lock: str, mtime_ns: int, size: int) -> dict[str, str]:
    """Every file output's MD5 in ``lock`` by its path (cached while the file is unchanged)."""
    stages = (yaml.safe_load(Path(lock).read_text()) or {}).get("stages", {})
    return {out["path"]: out["md5"] for stage in stages.values() for out in stage.get("outs", []) if "md5" in out}


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """The hex digest of ``path``'s bytes (``sha256`` for the sidecar; ``md5``, DVC's, for dvc.lock)."""
    hasher = hashlib.new(algorithm, usedforsecurity=False)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def check_content(path: str | os.PathLike) -> None:
    """Refuse ``path`` (CheckpointError) unless its bytes match its sidecar or ``dvc.lock``; warn when neither records it."""
    path = Path(path)
    recorded = recorded_digests(path)
    if recorded and file_digest(path) in recorded:
        return
    locked = dvc_locked_md5(path)
    if locked is not None and file_digest(path, "md5") == locked:
        return
    if not recorded and locked is None:
        logger.warning("%s: no digest of it is recorded (%s beside it, or dvc.lock): its content is not verified", path, record_path(path).name)
        return
    records = " and ".join(name for name, held in ((record_path(path).name, recorded), (DVC_LOCK, locked)) if held)
    raise CheckpointError(
        f"{path}: its bytes are not the ones recorded when it was written ({records}): it changed or was swapped since "
        "(a shared remote pulled without DVC's verify, a shared folder); pull it again from a remote with `verify = true` "
        "(docs/teams.md#security), or delete it and run the pipeline that writes it"
    )


def unverified_remotes(project: str | os.PathLike) -> list[str]:
    """The project's DVC remotes (every config level) that take a pulled file without checking its hash."""
    if not (Path(project) / ".dvc").is_dir():
        return []
    from dvc.config import Config

    remotes = Config(dvc_dir=str(Path(project) / ".dvc"))["remote"]
    return sorted(name for name, settings in remotes.items() if not settings.get("verify"))
