"""Writing files so that a crash never leaves half of one, and saying clearly why a write failed (one-line
:class:`FileWriteError`); :func:`clean_stale_temp_files` removes what interrupted writes left. See
docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
import stat
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Union

__all__ = ["FileWriteError", "atomic_write_bytes", "check_writable", "clean_stale_temp_files", "pid_alive",
           "temp_file_owner"]

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


#: ``<prefix><8 random hex digits>.rlearn-<pid>-<host>.tmp``
_TEMP_RE = re.compile(r"^\..*\.rlearn-(?P<pid>\d+)-(?P<host>[A-Za-z0-9-]*)\.tmp$")


class FileWriteError(OSError):
    """Writing a file failed; ``str()`` is one line naming the path, the cause and what was kept (``errno``,
    ``strerror`` and ``filename`` are those of the failure)."""

    def __init__(self, path: PathLike, cause: BaseException, kept: str) -> None:
        code = getattr(cause, "errno", None)
        reason = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
        super().__init__(code, reason, str(path))
        self.path = Path(path)
        self.kept = kept
        name, hint = errno.errorcode.get(code, ""), _HINTS.get(code)
        detail = f"{reason} ({name})" if name else reason
        self.message = f"cannot write {path}: {detail}" + (f": {hint}" if hint else "") + f"; {kept}"

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # pickle (multiprocessing, torch.distributed) with the message intact
        return (type(self), (self.path, OSError(self.errno, self.strerror), self.kept))


def _temp_suffix() -> str:
    return f".rlearn-{os.getpid()}-{_host_tag()}.tmp"


def atomic_write_bytes(path: PathLike, data: bytes, tmp_prefix: Optional[str] = None) -> Path:
    """Write ``data`` to ``path`` so that ``path`` holds either its old content or all of ``data``: through
    ``<tmp_prefix><random>.rlearn-<pid>-<host>.tmp`` (default prefix ``.<name>.``) in the same directory, fsynced
    and renamed over ``path``. A rewritten file keeps its permission bits; a new one gets ``0o666`` less the
    umask, like ``open()``. An :class:`OSError` becomes :class:`FileWriteError` (the temporary file removed,
    ``path`` untouched); other exceptions (``KeyboardInterrupt``...) propagate unchanged."""
    path = Path(path)
    prefix = tmp_prefix if tmp_prefix is not None else f".{path.name}."
    mode: Optional[int] = None
    tmp_name: Optional[str] = None
    try:
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(os.stat(path).st_mode)
        path.parent.mkdir(parents=True, exist_ok=True)
        name = os.path.join(path.parent, f"{prefix}{secrets.token_hex(4)}{_temp_suffix()}")
        # mode 0o666: the kernel applies the umask, as open() does (mkstemp would make it 0o600)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        tmp_name = name
        if mode is not None:
            os.fchmod(fd, mode)
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
        kept = "its previous content is kept unchanged" if mode is not None else "nothing was written"
        raise FileWriteError(path, exc, kept + leftover) from exc
    with contextlib.suppress(OSError):  # platforms without directory file descriptors
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


def check_writable(directory: PathLike) -> Path:
    """Check at start-up with a probe file that files can be written in ``directory`` (created if missing);
    :class:`FileWriteError` naming the directory and the cause otherwise."""
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
            with contextlib.suppress(OSError):
                os.unlink(probe)
        raise FileWriteError(directory, exc, "the directory is not writable (nothing was written there)") from exc
    return directory


def temp_file_owner(name: str) -> Optional[tuple]:
    """``(pid, host)`` encoded in an :func:`atomic_write_bytes` temporary name, None if ``name`` is not one
    of ours."""
    match = _TEMP_RE.match(name)
    return (int(match.group("pid")), match.group("host")) if match else None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (owned by any user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        pass
    return True


def clean_stale_temp_files(directory: PathLike, recursive: bool = True, min_age: float = 60.0,
                           live_owner_max_age: float = 86400.0) -> List[Path]:
    """Remove (and return) the temporary files that interrupted :func:`atomic_write_bytes` calls left in
    ``directory``: those whose PID does not run on this host; when that cannot be proven (this process's own
    PID, as after a container restart; another host) once unmodified for ``min_age`` seconds; one whose PID is
    alive (perhaps reused) once ``live_owner_max_age`` seconds old."""
    directory = Path(directory)  # a missing directory has no entries
    entries = directory.rglob(".*.tmp") if recursive else directory.glob(".*.tmp")
    host, me, now = _host_tag(), os.getpid(), time.time()
    removed: List[Path] = []
    for path in sorted(entries):
        owner = temp_file_owner(path.name)
        if owner is None:
            continue
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        age = now - info.st_mtime
        pid, pid_host = owner
        if pid_host == host and pid != me:
            stale = not pid_alive(pid) or age >= live_owner_max_age
        else:
            stale = age >= min_age
        if stale:
            with contextlib.suppress(OSError):  # vanished meanwhile, or not ours to remove
                path.unlink()
                removed.append(path)
    return removed
