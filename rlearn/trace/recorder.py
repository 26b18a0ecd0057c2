"""Per-process timeline recorder: a :class:`Tracer` appends one JSON object per line to
``<work_dir>/trace/rank<r>.jsonl`` (format: docs/timeline-traces.md; reader: :mod:`rlearn.trace.records`), in
batches, so a killed process keeps everything up to the last write.
"""

from __future__ import annotations

import atexit
import json
import math
import numbers
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from rlearn.fileio import PathLike
from rlearn.values import check_int, is_int, is_real

#: version of the records format, written in every header
RECORDS_VERSION = 1
#: monotonic clock used for ``start`` / ``end`` / ``t``
MONOTONIC_CLOCK = time.perf_counter_ns
#: lane used when a span name has no ``lane/`` prefix and no lane is given
DEFAULT_LANE = "main"


def records_path(work_dir: PathLike, rank: int) -> Path:
    """Where rank ``rank`` writes its records: ``<work_dir>/trace/rank<rank>.jsonl``."""
    return Path(work_dir) / "trace" / f"rank{rank}.jsonl"


def default_lane(name: str) -> str:
    """The lane of a span given without one: the part of ``name`` before the first ``/`` (``"main"`` if none)."""
    head, sep, _ = name.partition("/")
    return head if sep and head else DEFAULT_LANE


def _item(value: Any, what: str) -> Any:
    """``value``, or the Python scalar of a numpy scalar / one-element tensor (else TypeError naming ``what``)."""
    if isinstance(value, numbers.Real) or not hasattr(value, "item"):
        return value
    try:
        return value.item()
    except (ValueError, RuntimeError):
        raise TypeError(f"{what} must be a scalar, got {type(value).__name__} with several elements") from None


def _finite(value: Any, what: str, expected: str = "a real number") -> float:
    """``value`` as a finite float; TypeError / ValueError naming ``what``."""
    if not is_real(value):
        raise TypeError(f"{what} must be {expected}, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{what} is not finite ({value!r})")
    return float(value)


def check_arg(span: str, key: str, value: Any) -> Any:
    """A span arg as a JSON-ready ``str``, ``bool``, ``None``, int or finite float; raises ``TypeError`` /
    ``ValueError`` naming the span and the arg."""
    what = f"span {span!r}: arg {key!r}"
    value = _item(value, what)
    if value is None or isinstance(value, (str, bool)):
        return value
    return int(value) if is_int(value) else _finite(value, what, "a str, bool, None or a real number")


class Span:
    """Context manager that records one interval on exit (created by :meth:`Tracer.span`)."""

    __slots__ = ("_tracer", "_prefix", "_args", "_start")

    def __init__(self, tracer: "Tracer", prefix: str, args: Optional[str]) -> None:
        self._tracer = tracer
        self._prefix = prefix
        self._args = args
        self._start = 0

    def __enter__(self) -> "Span":
        self._start = MONOTONIC_CLOCK()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        end = MONOTONIC_CLOCK()
        tracer = self._tracer
        tid = tracer._native_ids.get(threading.get_ident())
        if tid is None:
            tid = tracer._native_ids[threading.get_ident()] = threading.get_native_id()
        args = self._args
        if exc_type is not None:
            error = json.dumps(exc_type.__name__)
            args = f'{args[:-1]},"error":{error}}}' if args else f'{{"error":{error}}}'
        args = "" if args is None else f',"args":{args}'
        tracer._write(f'{self._prefix}"start":{self._start},"end":{end},"tid":{tid}{args}}}\n', end)


class Tracer:
    """Records spans and counters of process ``rank`` into ``<work_dir>/trace/rank<rank>.jsonl``, writing them
    every ``flush_every`` records or ``flush_interval`` seconds; ``clock_offset``: ``(offset_ns, error_ns)`` of
    this rank's wall clock against rank 0's, if known. Usually made by :func:`rlearn.trace.enable`."""

    def __init__(self, work_dir: PathLike, rank: int = 0, *, flush_every: int = 256,
                 flush_interval: float = 1.0, clock_offset: Optional[Tuple[int, int]] = None) -> None:
        self.rank = check_int("trace rank", rank, 0)
        self.flush_every = check_int("flush_every", flush_every)
        if not (is_real(flush_interval) and flush_interval >= 0):
            raise ValueError(f"flush_interval must be a non-negative number of seconds, got {flush_interval!r}")
        self.path = records_path(work_dir, self.rank)
        self.pid = os.getpid()
        self._flush_interval_ns = int(flush_interval * 1e9)
        self._lock = threading.Lock()
        self._buffer: List[str] = []
        self._prefixes: Dict[Tuple[str, Optional[str]], str] = {}
        self._arg_keys: Dict[str, str] = {}
        self._native_ids: Dict[int, int] = {}  # threading.get_ident() -> OS thread id (no syscall per span)
        self.closed = False  # close() was called: later records are ignored
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        if self._file.tell() > 0:
            with open(self.path, "rb") as handle:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    self._file.write("\n")  # keep a torn last line of a killed session on its own line
        before = MONOTONIC_CLOCK()  # the anchor: a wall-clock reading and the monotonic one around it
        self.anchor_wall_ns = time.time_ns()
        self.anchor_mono_ns = (before + MONOTONIC_CLOCK()) // 2
        header: Dict[str, Any] = {
            "type": "header", "version": RECORDS_VERSION, "rank": self.rank, "pid": self.pid,
            "hostname": socket.gethostname(), "clock": "perf_counter_ns",
            "anchor_wall_ns": self.anchor_wall_ns, "anchor_mono_ns": self.anchor_mono_ns,
        }
        if clock_offset is not None:
            header["clock_offset_ns"], header["clock_error_ns"] = _check_offset(*clock_offset)
        self._file.write(json.dumps(header, separators=(",", ":")) + "\n")
        self._file.flush()
        self._last_flush = MONOTONIC_CLOCK()
        atexit.register(self.close)

    def span(self, name: str, lane: Optional[str] = None, args: Optional[Mapping[str, Any]] = None) -> Span:
        """A context manager recording what it encloses as phase ``name`` on ``lane`` with ``args`` (see
        :func:`rlearn.trace.span`); a body that raises adds an ``error`` arg."""
        key = (name, lane)
        try:
            prefix = self._prefixes.get(key)
        except TypeError:  # unhashable name or lane
            raise TypeError(f"span name and lane must be strings, got {name!r} and {lane!r}") from None
        if prefix is None:
            if not isinstance(name, str) or not name:
                raise TypeError(f"span name must be a non-empty str, got {name!r}")
            if lane is not None and (not isinstance(lane, str) or not lane):
                raise TypeError(f"span {name!r}: lane must be a non-empty str or None, got {lane!r}")
            prefix = (f'{{"type":"span","name":{json.dumps(name)},'
                      f'"lane":{json.dumps(lane or default_lane(name))},')
            self._prefixes[key] = prefix
        return Span(self, prefix, self._encode_args(name, args) if args else None)

    def _encode_args(self, name: str, args: Mapping[str, Any]) -> str:
        """``args`` as a compact JSON object; plain ints, floats and strings skip the general checks."""
        parts = []
        keys = self._arg_keys
        for key, value in args.items():
            encoded_key = keys.get(key)
            if encoded_key is None:
                encoded_key = keys[key] = json.dumps(str(key)) + ":"
            kind = type(value)
            if kind is int:
                parts.append(encoded_key + str(value))
            elif kind is float and math.isfinite(value):
                parts.append(encoded_key + repr(value))
            else:  # str; bool, None, numpy / torch scalars, or bad input (raises naming the span and arg)
                parts.append(encoded_key + json.dumps(value if kind is str else check_arg(name, key, value)))
        return "{" + ",".join(parts) + "}"

    def counter(self, name: str, value: Any, t: Optional[int] = None) -> None:
        """Record a sample of counter ``name`` at ``t`` (an int of :data:`MONOTONIC_CLOCK`, not in the future;
        None: now). A viewer holds the value until the next sample, so stamp a rate at its interval's *start*."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"counter name must be a non-empty str, got {name!r}")
        what = f"counter {name!r}: value"
        number = _finite(_item(value, what), what)
        now = MONOTONIC_CLOCK()
        if t is None:
            t = now
        elif not is_int(t) or t > now:
            raise ValueError(f"counter {name!r}: t must be an int time of perf_counter_ns() not in the future, "
                             f"got {t!r}")
        self._write(f'{{"type":"counter","name":{json.dumps(name)},"t":{t},"value":{number!r}}}\n', now)

    def set_clock_offset(self, offset_ns: int, error_ns: int) -> None:
        """Record this rank's wall clock minus rank 0's (``offset_ns``) and its error bound (``error_ns``)."""
        offset_ns, error_ns = _check_offset(offset_ns, error_ns)
        self._write(f'{{"type":"clock_offset","offset_ns":{offset_ns},"error_ns":{error_ns}}}\n', MONOTONIC_CLOCK())
        self.flush()

    def _write(self, line: str, now: int) -> None:
        # lock-free: list.append is atomic, and _flush_locked removes only the lines it wrote
        if self.closed:
            return
        buffer = self._buffer
        buffer.append(line)
        if len(buffer) >= self.flush_every or now - self._last_flush >= self._flush_interval_ns:
            self.flush()

    def _flush_locked(self) -> None:
        buffer = self._buffer
        count = len(buffer)
        if count and os.getpid() == self.pid:  # a forked child never writes its parent's records
            self._file.write("".join(buffer[:count]))
            self._file.flush()
        del buffer[:count]
        self._last_flush = MONOTONIC_CLOCK()

    def flush(self) -> None:
        """Write every buffered record to the file now."""
        with self._lock:
            if not self.closed:
                self._flush_locked()

    def close(self) -> None:
        """Write what is buffered and close the file (idempotent); later records are ignored."""
        with self._lock:
            if self.closed:
                return
            self._flush_locked()
            self.closed = True
            self._file.close()
        atexit.unregister(self.close)

    def _abandon_in_child(self) -> None:
        """After ``fork``: the child drops the parent's buffer and never writes to the parent's file."""
        self._lock = threading.Lock()
        self._buffer = []
        self.closed = True
        atexit.unregister(self.close)


def _check_offset(offset_ns: Any, error_ns: Any) -> Tuple[int, int]:
    for label, value in (("offset_ns", offset_ns), ("error_ns", error_ns)):
        if not is_int(value):
            raise TypeError(f"clock {label} must be an int number of nanoseconds, got {value!r}")
    if error_ns < 0:
        raise ValueError(f"clock error_ns must be >= 0, got {error_ns}")
    return int(offset_ns), int(error_ns)

