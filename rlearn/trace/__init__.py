"""Timeline trace of training phases: ``with span("learner/forward", lane="learner"): ...``, off by default (one
shared no-op context manager); with ``profile=True`` or ``RLEARN_PROFILE=1`` spans go to
``<work_dir>/trace/rank<r>.jsonl`` for ``rlearn trace WORK_DIR`` (see ``docs/timeline-traces.md``).
"""

from __future__ import annotations

import os
from typing import Any, Optional, Tuple

from rlearn.trace.recorder import DEFAULT_LANE, PathLike, Span, Tracer, _check_offset, records_path
from rlearn.trace.records import read_records

__all__ = ["span", "counter", "enable", "enable_from_env", "disable", "is_enabled", "is_requested", "get_tracer",
           "set_clock_offset", "flush", "Tracer", "Span", "NoOpSpan", "NOOP_SPAN", "ENV_VAR", "records_path",
           "read_records", "DEFAULT_LANE"]

#: environment variable that switches tracing on (``1``/``true``/``yes``/``on``) or leaves it off
ENV_VAR = "RLEARN_PROFILE"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


class NoOpSpan:
    """What :func:`span` returns when tracing is off: a context manager that does nothing."""

    __slots__ = ()

    def __enter__(self) -> "NoOpSpan":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        return None

    def __repr__(self) -> str:
        return "NOOP_SPAN"


#: the single no-op span returned by every :func:`span` call while tracing is off
NOOP_SPAN = NoOpSpan()

_tracer: Optional[Tracer] = None
_pending_offset: Optional[Tuple[int, int]] = None


def span(name: str, lane: Optional[str] = None, **args: Any) -> Any:
    """Context manager recording the phase ``name`` on ``lane`` (default: ``"learner/forward"`` -> ``"learner"``)
    with keyword ``args`` (str, bool, None or finite numbers); the no-op singleton when tracing is off."""
    return NOOP_SPAN if _tracer is None else _tracer.span(name, lane, args)


def counter(name: str, value: Any, t: Optional[int] = None) -> None:
    """Record a sample of counter ``name`` at ``t`` (see :meth:`Tracer.counter`); nothing when tracing is off."""
    if _tracer is not None:
        _tracer.counter(name, value, t)


def enable(work_dir: PathLike, rank: int = 0, **tracer_kwargs: Any) -> Tracer:
    """Start recording into ``<work_dir>/trace/rank<rank>.jsonl`` (appending) and return the :class:`Tracer`
    (made with ``tracer_kwargs``); the running tracer if it writes that file already (another one is closed)."""
    global _tracer
    path = records_path(work_dir, rank)
    if _tracer is not None:
        if _tracer.path.resolve() == path.resolve() and not _tracer.closed:
            return _tracer
        disable()
    _tracer = Tracer(work_dir, rank, clock_offset=_pending_offset, **tracer_kwargs)
    return _tracer


def is_requested(cfg_flag: Any = False) -> bool:
    """Whether the config's ``profile`` flag or ``RLEARN_PROFILE`` asks for tracing (ValueError for an unclear one)."""
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if raw not in _TRUE and raw not in _FALSE:
        raise ValueError(f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not understood; use 1 (on) or 0 (off)")
    if not isinstance(cfg_flag, bool):
        raise TypeError(f"config field 'profile' must be True or False, got {cfg_flag!r}")
    return cfg_flag or raw in _TRUE


def enable_from_env(work_dir: PathLike, rank: int = 0, cfg_flag: bool = False) -> Optional[Tracer]:
    """:func:`enable` if :func:`is_requested` (``cfg_flag`` or ``RLEARN_PROFILE``); return the tracer or ``None``."""
    return enable(work_dir, rank) if is_requested(cfg_flag) else None


def disable() -> None:
    """Stop recording: write what is buffered and close the file. Safe to call when tracing is off."""
    global _tracer, _pending_offset
    tracer, _tracer = _tracer, None
    _pending_offset = None
    if tracer is not None:
        tracer.close()


def is_enabled() -> bool:
    """Whether spans are being recorded in this process."""
    return _tracer is not None and not _tracer.closed


def get_tracer() -> Optional[Tracer]:
    """The running :class:`~rlearn.trace.recorder.Tracer`, or ``None`` when tracing is off."""
    return _tracer


def set_clock_offset(offset_ns: int, error_ns: int) -> None:
    """Record this rank's wall clock minus rank 0's and its error bound, in ns (before :func:`enable`: its header)."""
    global _pending_offset
    if _tracer is not None:
        _tracer.set_clock_offset(offset_ns, error_ns)
    else:
        _pending_offset = _check_offset(offset_ns, error_ns)


def flush() -> None:
    """Write buffered records now (does nothing when tracing is off)."""
    if _tracer is not None:
        _tracer.flush()


def _forget_in_child() -> None:
    """A forked child (e.g. an environment worker) does not record into its parent's file."""
    global _tracer
    if _tracer is not None:
        _tracer._abandon_in_child()
        _tracer = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
