"""Atomic file and folder replacement: a reader sees the old artefact or the new one, never half of one.

A temporary is written beside the target (same filesystem), flushed to disk, then renamed over it.
A folder is swapped with the kernel's atomic exchange (Linux ``renameat2(RENAME_EXCHANGE)``), so
there is no moment where neither the old folder nor the new one exists. Temporaries carry the
writer's PID and host; those of a dead writer on this host (a run killed mid-write) are removed by the
next write. Another machine's temporary in a shared folder is left alone: its PID means nothing here,
and its writer may still be writing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fdsml.config import ConfigError

RENAME_EXCHANGE = 2
AT_FDCWD = -100
FULL_BYTES = 1 << 20


class DiskFullError(ConfigError):
    """An output did not fit on its filesystem; nothing was replaced."""


@contextmanager
def atomic_path(target: str | os.PathLike, *, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success move it onto ``target``, else delete it.

    The temporary keeps the target's suffix (writers that infer a format from it still work).
    A full disk fails here, before the rename, and leaves the previous ``target`` untouched.
    Every file written into a temporary folder becomes readable as the umask allows (a library
    may create its files 0600, as safetensors does): an artefact is readable like any other file.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    prefix = f".{target.name}.tmp-{os.getpid()}@{socket.gethostname()}~"
    if directory:
        temporary = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    else:
        handle, name = tempfile.mkstemp(prefix=prefix, suffix=target.suffix, dir=target.parent)
        os.close(handle)
        temporary = Path(name)
    temporary.chmod((0o777 if directory else 0o666) & ~current_umask())
    try:
        yield temporary
        if directory:
            _readable_as_umask_allows(temporary)
            _swap_folder(temporary, target)
        else:
            _flush(temporary)
            os.replace(temporary, target)
    except Exception as error:
        if _is_disk_full(error, target.parent):
            raise DiskFullError(
                f"{target}: no space left on the disk while writing it; free space on that filesystem (or move "
                f"data/ to a larger one) and run again; the previous {target.name}, if any, is untouched"
            ) from error
        raise
    finally:
        _remove(temporary)


def current_umask() -> int:
    """The process umask, read without changing it (``os.umask`` sets it process-wide: not thread-safe)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return _UMASK_AT_IMPORT


def _readable_as_umask_allows(folder: Path) -> None:
    """Add the read bits (and, for folders, search bits) the umask grants to everything under ``folder``."""
    mask = current_umask()
    for path in folder.rglob("*"):
        wanted = (0o555 if path.is_dir() else 0o444) & ~mask
        mode = path.stat().st_mode & 0o7777
        if mode | wanted != mode:
            path.chmod(mode | wanted)


def remove_stale_temporaries(target: Path) -> None:
    """Delete the temporaries of ``target`` left by writers of this host that no longer run (a killed run)."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.tmp-(\d+)@([^~]+)~")
    host = socket.gethostname()
    for sibling in target.parent.iterdir():
        match = pattern.match(sibling.name)
        if match and match.group(2) == host and not pid_alive(int(match.group(1))):
            _remove(sibling)


def _swap_folder(new: Path, target: Path) -> None:
    """Put folder ``new`` at ``target``; the old folder ends up at ``new`` (deleted by the caller)."""
    if not target.exists():
        os.rename(new, target)
        return
    if _exchange(new, target):
        return
    old = new.with_name(new.name + "-old")  # no atomic exchange here: two renames, a short gap
    os.rename(target, old)
    os.rename(new, target)
    os.rename(old, new)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths; False where the platform or filesystem cannot."""
    renameat2 = getattr(_LIBC, "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _is_disk_full(error: BaseException | None, folder: Path) -> bool:
    """Whether ``error`` or an error it was raised from is ENOSPC / EDQUOT (writers wrap it in their own types),
    or a short write without an errno (NumPy's ``tofile``) on a filesystem with under 1 MiB left."""
    while error is not None:
        if isinstance(error, OSError):
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                return True
            if error.errno is None and shutil.disk_usage(folder).free < FULL_BYTES:
                return True
        error = error.__cause__ or error.__context__
    return False


def _flush(path: Path) -> None:
    """Force the file's bytes to disk so a full disk is reported now, not after the rename."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def pid_alive(pid: int | None) -> bool:
    """Whether process ``pid`` exists (a process of another user counts; None is no process)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_umask_once() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK_AT_IMPORT = _read_umask_once()  # fallback where /proc is missing; import runs before any thread
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None
