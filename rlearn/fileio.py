"""Writing files so that a crash never leaves half of one, and saying clearly why a write failed.

* :func:`atomic_write_bytes`: a temporary file in the same directory, fsync, rename. A kill or an error
  mid-write leaves the previous file intact; a failed write raises :class:`FileWriteError`, whose one-line
  message names the path, the cause (disk full, read-only file system, no permission...) and what was kept.
* :func:`clean_stale_temp_files`: removes the temporary files that interrupted writes (``kill -9``, power
  loss) left behind, and only those: the temporary name carries the writer's PID and host, so a file
  that a live process is still writing is never touched.
* :func:`check_writable`: a start-up probe (create, write, fsync and remove a file), so that a read-only
  or full directory is reported before the run starts, not at its first checkpoint.

Used by checkpoints (:mod:`rlearn.checkpoint`) and the TensorBoard rewind (:mod:`rlearn.writers.tb_events`).
"""

from __future__ import annotations

import errno
import os
import stat
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Union

__all__ = [
    "FileWriteError",
    "atomic_write_bytes",
    "check_writable",
    "clean_stale_temp_files",
    "temp_file_owner",
]

PathLike = Union[str, "os.PathLike[str]"]

#: what an errno means for the person running the job
_HINTS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "no permission to write there",
    errno.EPERM: "no permission to write there",
    errno.EIO: "an I/O error (failing disk or lost network file system)",
}


def _host_tag() -> str:
    """This machine's host name as it appears in temporary names (letters, digits and dashes)."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40]


#: ``<prefix><8 random chars>.rlearn-<pid>-<host>.tmp`` (the random part comes from ``tempfile``)
_TEMP_RE = re.compile(r"^\..*\.rlearn-(?P<pid>\d+)-(?P<host>[A-Za-z0-9-]*)\.tmp$")
#: names written by rlearn versions whose temporary names did not carry the PID
_LEGACY_TEMP_RE = re.compile(r"^\.(?:.+\.pt\.|rlearn-rewind-)[a-z0-9_]{8}\.tmp$")


class FileWriteError(OSError):
    """Writing a file failed; ``str()`` is one line naming the path, the cause and what was kept.

    An :class:`OSError` (``errno``, ``strerror`` and ``filename`` are those of the failure), so code that
    catches ``OSError`` keeps working.
    """

    def __init__(self, path: PathLike, cause: BaseException, kept: str) -> None:
        code = getattr(cause, "errno", None)
        reason = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
        super().__init__(code, reason, str(path))
        self.path = Path(path)
        self.kept = kept
        name = errno.errorcode.get(code, "") if code is not None else ""
        hint = _HINTS.get(code) if code is not None else None
        detail = f"{reason} ({name})" if name else reason
        self.message = f"cannot write {path}: {detail}" + (f": {hint}" if hint else "") + f"; {kept}"

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # pickle (multiprocessing, torch.distributed) with the message intact
        return (_rebuild_file_write_error, (str(self.path), self.errno, self.strerror, self.kept, self.message))


def _rebuild_file_write_error(path: str, code: Optional[int], reason: str, kept: str, message: str) -> FileWriteError:
    error = FileWriteError(path, OSError(code, reason) if code is not None else OSError(reason), kept)
    error.message = message
    return error


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # platforms without directory file descriptors
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_suffix() -> str:
    return f".rlearn-{os.getpid()}-{_host_tag()}.tmp"


def _target_mode(path: Path) -> Optional[int]:
    """The permission bits of ``path`` if it exists (a rewrite keeps them), else None."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _umask() -> int:
    """The process umask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def atomic_write_bytes(path: PathLike, data: bytes, tmp_prefix: Optional[str] = None) -> Path:
    """Write ``data`` to ``path`` so that ``path`` holds either its old content or all of ``data``.

    The bytes go to a temporary file in the same directory (same file system), which is flushed,
    fsynced and renamed over ``path``; then the directory is fsynced. The temporary file is named
    ``<tmp_prefix><random>.rlearn-<pid>-<host>.tmp`` (default prefix ``.<name>.``), so that
    :func:`clean_stale_temp_files` can tell the leftovers of a killed writer from a live write. A rewritten
    file keeps its permission bits; a new one gets ``0o666`` less the umask, like ``open()``.

    On any error the temporary file is removed and ``path`` is left untouched; an :class:`OSError`
    (disk full, read-only file system, no permission, I/O error) is raised as :class:`FileWriteError`,
    whose message names ``path`` and says what was kept. Other exceptions (``KeyboardInterrupt``...)
    propagate unchanged.
    """
    path = Path(path)
    prefix = tmp_prefix if tmp_prefix is not None else f".{path.name}."
    existed = False
    tmp_name: Optional[str] = None
    try:
        mode = _target_mode(path)
        existed = mode is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=_temp_suffix(), dir=path.parent)
        os.fchmod(fd, mode if mode is not None else 0o666 & ~_umask())  # mkstemp makes it 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException as exc:
        leftover = ""
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except FileNotFoundError:
                pass
            except OSError as unlink_exc:
                leftover = f" (could not remove the temporary file {tmp_name}: {unlink_exc.strerror})"
        if not isinstance(exc, OSError) or isinstance(exc, FileWriteError):
            raise
        if existed:
            kept = f"its previous content is kept unchanged{leftover}"
        else:
            kept = f"nothing was written{leftover}"
        raise FileWriteError(path, exc, kept) from exc
    _fsync_dir(path.parent)
    return path


def check_writable(directory: PathLike) -> Path:
    """Check at start-up that files can be created in ``directory`` (created if missing).

    Creates, writes, fsyncs and removes a probe file. Raises :class:`FileWriteError` naming the
    directory and the cause (read-only file system, no permission, disk full...). Returns the directory.
    """
    directory = Path(directory)
    probe: Optional[str] = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".rlearn-write-probe.", suffix=_temp_suffix(), dir=directory)
        try:
            os.write(fd, b"rlearn write probe\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        if probe is not None:
            try:
                os.unlink(probe)
            except OSError:
                pass
        raise FileWriteError(
            directory, exc, "the directory is not writable (nothing was written there)"
        ) from exc
    return directory


def temp_file_owner(name: str) -> Optional[tuple]:
    """``(pid, host)`` encoded in an :func:`atomic_write_bytes` temporary name, ``(None, None)`` for a
    temporary name of an older rlearn (no owner recorded), None if ``name`` is not one of ours."""
    match = _TEMP_RE.match(name)
    if match:
        return int(match.group("pid")), match.group("host")
    if _LEGACY_TEMP_RE.match(name):
        return None, None
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def clean_stale_temp_files(
    directory: PathLike,
    recursive: bool = True,
    min_age: float = 60.0,
    live_owner_max_age: float = 86400.0,
) -> List[Path]:
    """Remove the temporary files that interrupted :func:`atomic_write_bytes` calls left in ``directory``.

    Only names matching rlearn's temporary pattern are considered. A file is removed when its writer is
    provably gone: the PID in its name is not running on this host. When that cannot be proven (the
    file names this process's own PID, as after a container restart, another host, or it comes from an
    older rlearn that did not record the PID) it is removed once it has not been modified for
    ``min_age`` seconds; a file whose PID is alive (perhaps reused by an unrelated process) once it is
    ``live_owner_max_age`` seconds old. Returns the removed paths (files that vanish meanwhile or cannot
    be removed are skipped).
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    entries = directory.rglob(".*.tmp") if recursive else directory.glob(".*.tmp")
    host, me, now = _host_tag(), os.getpid(), time.time()
    removed: List[Path] = []
    for path in sorted(entries):
        owner = temp_file_owner(path.name)
        if owner is None:
            continue
        try:
            stat = path.lstat()
        except FileNotFoundError:
            continue
        if not path.is_file() or path.is_symlink():
            continue
        age = now - stat.st_mtime
        pid, pid_host = owner
        if pid is not None and pid_host == host and pid != me:
            stale = not _pid_alive(pid) or age >= live_owner_max_age
        else:
            stale = age >= min_age
        if not stale:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed
