"""Faults: disk full, read-only or forbidden directories, temporary files of interrupted saves (item 7).

Before: ``ENOSPC`` while saving gave a raw errno traceback, a read-only ``ckpt/`` was found only at the
first save, and a kill mid-save left ``.latest.pt.XXXX.tmp`` files forever. Now a failed write raises
:class:`FileWriteError`, one line naming the path, the cause and what was kept; :func:`check_writable` is
the start-up check; :func:`clean_stale_temp_files` removes the leftovers of dead writers only.

The errors are produced two ways: by monkeypatching the system calls (runs everywhere, also as root,
where ``chmod`` does not stop writes), and for real on a tiny tmpfs (full, then remounted read-only)
where the test may mount one (root on Linux; skipped elsewhere).
"""

from __future__ import annotations

import errno
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlearn import fileio
from rlearn.fileio import FileWriteError, atomic_write_bytes, check_writable, clean_stale_temp_files, temp_file_owner


def only_file(directory):
    return sorted(p.name for p in directory.iterdir())


# ------------------------------------------------------------------------------ monkeypatched errors
@pytest.mark.parametrize("stage", ["write", "fsync"])
def test_disk_full_while_saving_keeps_the_previous_file(tmp_path, monkeypatch, stage):
    target = tmp_path / "latest.pt"
    atomic_write_bytes(target, b"good")

    def no_space(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if stage == "fsync":
        monkeypatch.setattr(fileio.os, "fsync", no_space)
    else:
        real_fdopen = os.fdopen

        class FullDisk:
            def __init__(self, handle):
                self.handle = handle

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.handle.close()

            def write(self, data):
                self.handle.write(data[:3])
                no_space()

        monkeypatch.setattr(fileio.os, "fdopen", lambda fd, mode: FullDisk(real_fdopen(fd, mode)))
    with pytest.raises(FileWriteError) as caught:
        atomic_write_bytes(target, b"new content")
    assert str(caught.value) == (
        f"cannot write {target}: No space left on device (ENOSPC): the disk is full; its previous content is "
        "kept unchanged"
    )
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(target)
    assert target.read_bytes() == b"good" and only_file(tmp_path) == ["latest.pt"]


@pytest.mark.parametrize("code, hint", [(errno.EROFS, "the file system is read-only"), (errno.EACCES, "no permission to write there")])
def test_read_only_or_forbidden_directory(tmp_path, monkeypatch, code, hint):
    real_open = os.open

    def refusing_open(path, flags, *args, **kwargs):
        if str(path).startswith(str(tmp_path)) and flags & os.O_CREAT:
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(fileio.tempfile._os, "open", refusing_open)
    target = tmp_path / "ckpt" / "iteration_10.pt"
    with pytest.raises(FileWriteError) as caught:
        atomic_write_bytes(target, b"x")
    name = errno.errorcode[code]
    assert str(caught.value) == f"cannot write {target}: {os.strerror(code)} ({name}): {hint}; nothing was written"
    with pytest.raises(FileWriteError) as caught:
        check_writable(tmp_path / "ckpt")
    assert str(caught.value) == (
        f"cannot write {tmp_path / 'ckpt'}: {os.strerror(code)} ({name}): {hint}; the directory is not writable "
        "(nothing was written there)"
    )


def test_check_writable_creates_the_directory_and_leaves_nothing(tmp_path):
    assert check_writable(tmp_path / "a" / "ckpt") == tmp_path / "a" / "ckpt"
    assert only_file(tmp_path / "a" / "ckpt") == []
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(FileWriteError, match=rf"cannot write {blocker / 'ckpt'}: .*\(E(EXIST|NOTDIR)\)"):
        check_writable(blocker / "ckpt")


def test_write_error_survives_pickling():
    error = FileWriteError("/w/ckpt/latest.pt", OSError(errno.ENOSPC, "No space left on device"), "kept")
    back = pickle.loads(pickle.dumps(error))
    assert str(back) == str(error) and back.errno == errno.ENOSPC and back.filename == "/w/ckpt/latest.pt"


def test_other_exceptions_are_not_wrapped(tmp_path, monkeypatch):
    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(tmp_path / "x", b"1")
    assert only_file(tmp_path) == []


# --------------------------------------------------------------------------------- on a real tmpfs
@pytest.fixture
def tiny_tmpfs(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_real_full_disk_and_read_only_file_system(tiny_tmpfs):
    target = tiny_tmpfs / "ckpt" / "latest.pt"
    atomic_write_bytes(target, b"good" * 1000)
    with pytest.raises(FileWriteError, match=rf"^cannot write {target}: No space left on device \(ENOSPC\): the disk is full; its previous content is kept unchanged$"):
        atomic_write_bytes(target, b"x" * 400_000)
    assert target.read_bytes() == b"good" * 1000 and only_file(target.parent) == ["latest.pt"]

    subprocess.run(["mount", "-o", "remount,ro", str(tiny_tmpfs)], check=True)
    with pytest.raises(FileWriteError, match=r"Read-only file system \(EROFS\): the file system is read-only; the directory is not writable"):
        check_writable(tiny_tmpfs / "ckpt")
    with pytest.raises(FileWriteError, match=r"\(EROFS\).*; its previous content is kept unchanged$"):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"good" * 1000


# ---------------------------------------------------------------------------------- stale temp files
KILLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from rlearn import fileio
    real_fsync = os.fsync
    def stall(fd):  # the data is written; the process is killed before the rename
        print("writing", flush=True)
        time.sleep(60)
    fileio.os.fsync = stall
    fileio.atomic_write_bytes(sys.argv[1], b"new" * 1000)
    """
)


def test_kill_during_save_leaves_a_temp_file_that_the_next_start_removes(tmp_path):
    target = tmp_path / "latest.pt"
    atomic_write_bytes(target, b"good")
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline() == b"writing\n"
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.wait(timeout=30)
        writer.stdout.close()
    (leftover,) = [p for p in tmp_path.iterdir() if p.name != "latest.pt"]
    assert leftover.name.startswith(".latest.pt.") and temp_file_owner(leftover.name)[0] == writer.pid
    assert target.read_bytes() == b"good"

    assert clean_stale_temp_files(tmp_path) == [leftover]  # the writer's PID is dead: removed at once
    assert only_file(tmp_path) == ["latest.pt"]


def test_temp_files_of_live_writers_and_foreign_files_are_left_alone(tmp_path):
    host = fileio._host_tag()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".latest.pt.abcd1234.rlearn-{sleeper.pid}-{host}.tmp"
        mine = tmp_path / "tb" / f".rlearn-rewind-efgh5678.rlearn-{os.getpid()}-{host}.tmp"
        other_host = tmp_path / f".iteration_5.pt.ijkl9012.rlearn-1-elsewhere.tmp"
        user_files = [tmp_path / ".notes.tmp", tmp_path / "data.tmp", tmp_path / ".latest.pt.abcd.tmp",
                      tmp_path / ".iteration_10.pt.mnop3456.tmp"]  # no rlearn owner in the name: not ours
        mine.parent.mkdir()
        for path in (live, mine, other_host, *user_files):
            path.write_bytes(b"x")
        assert clean_stale_temp_files(tmp_path) == []  # all recent, or a live owner, or not ours
        old = time.time() - 120
        for path in (live, mine, other_host, *user_files):
            os.utime(path, (old, old))
        # after min_age: files whose owner cannot be proven dead go; the live writer's file stays
        assert set(clean_stale_temp_files(tmp_path)) == {mine, other_host}
        assert clean_stale_temp_files(tmp_path, recursive=False) == []
        assert live.exists() and all(p.exists() for p in user_files)
        ancient = time.time() - 2 * 86400  # a live PID on a file untouched for two days: a reused PID
        os.utime(live, (ancient, ancient))
        assert clean_stale_temp_files(tmp_path) == [live]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_temp_names_carry_the_writer(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(Path(src).name)
        return real_replace(src, dst)

    monkeypatch.setattr(fileio.os, "replace", spy)
    atomic_write_bytes(tmp_path / "iteration_3.pt", b"1")
    atomic_write_bytes(tmp_path / "events.out.tfevents.1", b"1", tmp_prefix=".rlearn-rewind-")
    assert [temp_file_owner(name) for name in seen] == [(os.getpid(), fileio._host_tag())] * 2
    assert seen[0].startswith(".iteration_3.pt.") and seen[1].startswith(".rlearn-rewind-")
    assert "tfevents" not in seen[1]


def test_rewritten_files_keep_their_permissions_and_new_files_follow_the_umask(tmp_path):
    """An atomic rewrite keeps the old mode; a new file gets 0666 & ~umask, like open() (never 0600)."""
    target = tmp_path / "config.py"
    target.write_text("old")
    os.chmod(target, 0o640)
    atomic_write_bytes(target, b"new")
    assert (target.read_bytes(), target.stat().st_mode & 0o777) == (b"new", 0o640)
    previous = os.umask(0o027)
    try:
        atomic_write_bytes(tmp_path / "fresh.pt", b"x")
    finally:
        os.umask(previous)
    assert (tmp_path / "fresh.pt").stat().st_mode & 0o777 == 0o640
