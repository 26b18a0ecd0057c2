"""Where a run failed: :func:`failure_line` turns the error that ends a run into the last line of its log
(``run failed: RuntimeError: boom (train_iter 37, envstep 1184; raised in /src/p.py, line 88, in f())``)."""

from __future__ import annotations

import os
import sysconfig
import traceback
from typing import List, Optional

__all__ = ["failure_line", "error_location"]

_LIBRARY_ROOTS = tuple(
    os.path.realpath(p) for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    if p
)


def _in_library(filename: str) -> bool:
    path = os.path.realpath(filename)
    return "site-packages" in path or "dist-packages" in path or path.startswith(_LIBRARY_ROOTS) or filename.startswith("<")


def _frame(entry: traceback.FrameSummary) -> str:
    return f"{entry.filename}, line {entry.lineno}, in {entry.name}()"


def error_location(exc: BaseException) -> Optional[str]:
    """``"<file>, line <n>, in <function>()"`` where ``exc`` was raised, and ``"(from ...)"`` the innermost frame
    outside installed libraries when it was raised inside one; None without a traceback."""
    frames: List[traceback.FrameSummary] = list(traceback.extract_tb(exc.__traceback__)) if exc.__traceback__ else []
    if not frames:
        return None
    where = _frame(frames[-1])
    if _in_library(frames[-1].filename):
        own = [f for f in frames if not _in_library(f.filename)]
        if own:
            where += f" (from {_frame(own[-1])})"
    return where


def failure_line(exc: BaseException, train_iter: Optional[int], envstep: Optional[int],
                 prefix: str = "run failed") -> str:
    """One line: ``<prefix>: <Type>: <message> (train_iter I, envstep E; raised in <location>)``."""
    message = " ".join(str(exc).split()) or "(no message)"
    details = [f"train_iter {train_iter}, envstep {envstep}" if train_iter is not None else "while starting"]
    where = error_location(exc)
    if where:
        details.append(f"raised in {where}")
    return f"{prefix}: {type(exc).__name__}: {message} ({'; '.join(details)})"
