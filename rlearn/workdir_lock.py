"""One live run per work directory: a run holds an ``fcntl.flock`` on ``<work_dir>/.lock`` for its whole life
(the kernel releases it however the process ends); the file names the holder for the refusal message. File
systems without ``flock`` fall back to checking that PID (same host only, not atomic). See docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional, Tuple

from rlearn.fileio import PathLike, pid_alive

__all__ = ["LOCK_NAME", "LockHolder", "WorkDirBusyError", "WorkDirError", "WorkDirLock", "claim_free_work_dir",
           "existing_run"]

#: name of the lock file inside the work dir
LOCK_NAME = ".lock"
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


class WorkDirError(RuntimeError):
    """A work dir cannot be used; the message names it."""


class WorkDirBusyError(WorkDirError):
    """Another live run holds the work dir's lock; :attr:`holder` says which (None if unreadable)."""

    def __init__(self, message: str, work_dir: Path, holder: Optional["LockHolder"]) -> None:
        super().__init__(message)
        self.work_dir = work_dir
        self.holder = holder


@dataclass(frozen=True)
class LockHolder:
    """What a lock file says about the run that wrote it."""

    pid: int
    host: str
    started: float  # wall-clock time (seconds since the epoch) the lock was taken
    argv: Tuple[str, ...] = ()

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        command = f", command: {' '.join(self.argv)}" if self.argv else ""
        return f"PID {self.pid} on host {self.host}, started {when}{command}"

    def alive(self) -> Optional[bool]:
        """Whether the process runs; None when it is on another host (cannot tell)."""
        return pid_alive(self.pid) if self.host == socket.gethostname() else None


def _parse_holder(text: bytes) -> Optional[LockHolder]:
    try:
        data = json.loads(text)
        return LockHolder(int(data["pid"]), str(data["host"]), float(data["started"]),
                          tuple(map(str, data.get("argv", ()))))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _read_fd(fd: int) -> bytes:
    return os.pread(fd, os.fstat(fd).st_size, 0)


class WorkDirLock:
    """Exclusive lock of a work directory (``<work_dir>/.lock``), as a context manager
    (``with WorkDirLock(work_dir) as lock: ...``) or with :meth:`acquire` / :meth:`release`."""

    def __init__(self, work_dir: PathLike) -> None:
        self.work_dir = Path(work_dir)
        self.path = self.work_dir / LOCK_NAME
        #: the holder recorded in a lock file left behind by a run that died without releasing it
        self.took_over: Optional[LockHolder] = None
        #: False when the file system has no flock and only the PID check protects the directory
        self.exclusive = True
        self._fd: Optional[int] = None
        self._record = b""

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> "WorkDirLock":
        """Take the lock (creating the work dir if needed) without waiting: :class:`WorkDirBusyError` naming the
        live run holding it, :class:`WorkDirError` when the path is not a directory or the lock file fails."""
        if self._fd is not None:
            raise WorkDirError(f"work dir {self.work_dir}: this lock is already held")
        if self.work_dir.exists() and not self.work_dir.is_dir():
            raise WorkDirError(f"work dir {self.work_dir} exists and is not a directory")
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            fd = self._open_locked()
        except OSError as exc:
            raise self._error("create", exc) from exc
        # a clean release removes the file: a holder recorded in it died without releasing
        self.took_over = _parse_holder(_read_fd(fd))
        holder = LockHolder(os.getpid(), socket.gethostname(), time.time(), tuple(sys.argv))
        self._record = json.dumps(asdict(holder)).encode("utf-8")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, self._record, 0)
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            raise self._error("write", exc) from exc
        self._fd = fd
        return self

    def _open_locked(self) -> int:
        """Open the lock file and flock it; retries when the previous holder removed the file meanwhile."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self._busy(self._wait_for_holder()) from None
            except OSError as exc:
                if exc.errno not in _NO_FLOCK:
                    os.close(fd)
                    raise
                return self._pid_fallback(fd)
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)  # we locked a file its holder unlinked while releasing: start again

    def _pid_fallback(self, fd: int) -> int:
        holder = _parse_holder(_read_fd(fd))
        if holder is not None and holder.pid != os.getpid() and holder.alive() is not False:
            os.close(fd)
            raise self._busy(holder)
        self.exclusive = False
        return fd

    def _wait_for_holder(self, timeout: float = 1.0) -> Optional[LockHolder]:
        """The holder named in the file; waits briefly, since a run that has just taken the lock may not
        have written its PID yet."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                holder = _parse_holder(self.path.read_bytes())
            except OSError:
                holder = None
            if holder is not None or time.monotonic() >= deadline:
                return holder
            time.sleep(0.02)

    def _error(self, verb: str, exc: OSError) -> WorkDirError:
        return WorkDirError(f"work dir {self.work_dir}: cannot {verb} the lock file {self.path}: "
                            f"{exc.strerror or exc}")

    def _busy(self, holder: Optional[LockHolder]) -> WorkDirBusyError:
        who = holder.describe() if holder is not None else "PID unknown: its lock file is empty or unreadable"
        message = (f"work dir {self.work_dir} is in use by a live run ({who}); two runs never share a work dir: "
                   "wait for it to end or stop it, or choose another --work-dir")
        return WorkDirBusyError(message, self.work_dir, holder)

    def release(self) -> None:
        """Release the lock and remove the lock file (nothing happens when not held)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            if self.exclusive or _read_fd(fd) == self._record:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    os.unlink(self.path)  # while still locked: a waiting acquirer sees the inode change
        os.close(fd)

    def __enter__(self) -> "WorkDirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)


def existing_run(work_dir: PathLike) -> Optional[str]:
    """Why ``work_dir`` already holds a run (``"<dir>/ckpt holds checkpoints"``, ``"<dir>/tb holds
    TensorBoard events"``), or None."""
    work_dir = Path(work_dir)
    ckpt = work_dir / "ckpt"
    if ckpt.is_dir() and any(ckpt.glob("*.pt")):
        return f"{ckpt} holds checkpoints"
    tb = work_dir / "tb"
    if tb.is_dir() and any("tfevents" in p.name for p in tb.rglob("*")):
        return f"{tb} holds TensorBoard events"
    return None


def claim_free_work_dir(default: PathLike, holds_run: Callable[[Path], Optional[str]] = existing_run,
                        max_tries: int = 10_000) -> Tuple[Path, WorkDirLock]:
    """Lock and return the first of ``default``, ``<default>_2``, ``<default>_3``... that is free: not locked by a
    live run, a directory (or absent), and holding no run (``holds_run`` returns None). The lock is taken
    *before* the directory is inspected and returned held (the caller releases it), so processes started at the
    same moment never get the same directory."""
    default = Path(default)
    for n in range(1, max_tries + 1):
        candidate = default if n == 1 else default.with_name(f"{default.name}_{n}")
        if candidate.exists() and not candidate.is_dir():
            continue
        lock = WorkDirLock(candidate)
        try:
            lock.acquire()
        except WorkDirBusyError:
            continue
        if holds_run(candidate):
            lock.release()
            continue
        return candidate, lock
    raise WorkDirError(f"no free work dir among {default} and {default.name}_2 .. {default.name}_{max_tries}")
