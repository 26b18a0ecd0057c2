"""Writing files so that a crash never leaves half of one: :func:`atomic_write_bytes`.

Used by checkpoints (:mod:`rlearn.checkpoint`) and the TensorBoard rewind (:mod:`rlearn.writers.tb_events`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional, Union

__all__ = ["atomic_write_bytes"]

PathLike = Union[str, "os.PathLike[str]"]


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


def atomic_write_bytes(path: PathLike, data: bytes, tmp_prefix: Optional[str] = None) -> Path:
    """Write ``data`` to ``path`` so that ``path`` holds either its old content or all of ``data``.

    The bytes go to a temporary file in the same directory (same file system), which is flushed,
    fsynced and renamed over ``path``; on any error the temporary file is removed and ``path`` is left
    untouched. ``tmp_prefix`` names the temporary file (default ``.<name>.``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = tmp_prefix if tmp_prefix is not None else f".{path.name}."
    fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)
    return path
