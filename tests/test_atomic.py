"""fdsml.atomic's fallbacks and permissions: the folder swap without an atomic exchange, renameat2's errors, the umask read live."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from fdsml import atomic
from fdsml.atomic import atomic_path, current_umask


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_umask_is_read_as_it_is_now_not_as_it_was_at_import():
    previous = os.umask(0o077)
    try:
        assert current_umask() == 0o077
    finally:
        os.umask(previous)
    assert current_umask() == previous


def test_a_written_folder_is_readable_as_the_umask_allows(tmp_path, umask_022):
    with atomic_path(tmp_path / "model", directory=True) as folder:
        (folder / "weights").mkdir()
        (folder / "weights" / "model.safetensors").write_bytes(b"w")
        (folder / "config.json").write_text("{}")
        (folder / "weights" / "model.safetensors").chmod(0o600)  # as safetensors creates it
        (folder / "weights").chmod(0o700)
        (folder / "config.json").chmod(0o640)
    target = tmp_path / "model"
    assert mode(target) == 0o755 and mode(target / "weights") == 0o755
    assert mode(target / "weights" / "model.safetensors") == 0o644 and mode(target / "config.json") == 0o644


def test_without_an_atomic_exchange_a_folder_is_swapped_by_renames(tmp_path, monkeypatch):
    target = tmp_path / "shards"
    with atomic_path(target, directory=True) as folder:
        (folder / "version").write_text("1")
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    with atomic_path(target, directory=True) as folder:
        (folder / "version").write_text("2")
    assert (target / "version").read_text() == "2" and [p.name for p in tmp_path.iterdir()] == ["shards"]


def test_a_folder_swap_works_on_a_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for version in ("1", "2"):
        with atomic_path("data/shards", directory=True) as folder:
            (folder / "version").write_text(version)
    assert (tmp_path / "data" / "shards" / "version").read_text() == "2" and os.listdir(tmp_path / "data") == ["shards"]


class FailingLibc:
    """A libc whose renameat2 fails with ``code``."""

    def __init__(self, code: int):
        self.code, self.calls = code, []

    def renameat2(self, *args):
        self.calls.append(args)
        return -1


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOSYS, errno.ENOTSUP])
def test_a_filesystem_without_renameat2_falls_back(tmp_path, monkeypatch, code):
    libc = FailingLibc(code)
    monkeypatch.setattr(atomic, "_LIBC", libc)
    monkeypatch.setattr(atomic.ctypes, "get_errno", lambda: code)
    assert atomic._exchange(tmp_path / "a", tmp_path / "b") is False
    assert libc.calls == [(atomic.AT_FDCWD, os.fsencode(tmp_path / "a"), atomic.AT_FDCWD, os.fsencode(tmp_path / "b"), atomic.RENAME_EXCHANGE)]


def test_another_renameat2_error_is_raised_naming_the_target(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "_LIBC", FailingLibc(errno.EACCES))
    monkeypatch.setattr(atomic.ctypes, "get_errno", lambda: errno.EACCES)
    with pytest.raises(PermissionError) as raised:
        atomic._exchange(tmp_path / "a", tmp_path / "b")
    assert raised.value.errno == errno.EACCES and raised.value.filename == str(tmp_path / "b")
    assert raised.value.strerror == os.strerror(errno.EACCES)


def test_without_renameat2_in_the_libc_there_is_no_exchange(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "_LIBC", object())
    assert atomic._exchange(tmp_path / "a", tmp_path / "b") is False


def test_only_a_full_disk_reads_as_one(tmp_path):
    full = OSError(errno.ENOSPC, "No space left on device")
    wrapped = RuntimeError("the writer's own error")
    wrapped.__cause__ = full
    assert atomic._is_disk_full(full, tmp_path) and atomic._is_disk_full(wrapped, tmp_path)
    short_write = OSError("short write")  # no errno: a full disk only when under 1 MiB is left, and this one has more
    assert not atomic._is_disk_full(short_write, tmp_path)
    assert not atomic._is_disk_full(ValueError("bad value"), tmp_path) and not atomic._is_disk_full(None, tmp_path)


def test_no_pid_is_no_process_and_this_one_is_alive():
    assert atomic.pid_alive(os.getpid()) and not atomic.pid_alive(None)
