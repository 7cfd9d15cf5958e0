"""Atomic file and folder replacement: a reader sees the old artefact or the new one, never half of one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: str | os.PathLike, *, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it over ``target``, else delete it.

    The temporary sits in the same folder so the final ``os.replace`` is a same-filesystem rename.
    A folder target is swapped in two renames (old aside, new in), the old one removed last.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}.tmp-"
    temporary = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent)) if directory else Path(
        tempfile.mkstemp(prefix=prefix, dir=target.parent)[1]
    )
    temporary.chmod(0o777 & ~_umask() if directory else 0o666 & ~_umask())
    try:
        yield temporary
        if directory:
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            if target.exists():
                os.replace(target, old)
            os.replace(temporary, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(temporary, target)
    except BaseException:
        if temporary.is_dir():
            shutil.rmtree(temporary, ignore_errors=True)
        else:
            temporary.unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask (read by setting it, then restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
