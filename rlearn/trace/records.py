"""Reading a rank's timeline records (``<work_dir>/trace/rank<r>.jsonl``, written by
:class:`rlearn.trace.recorder.Tracer`), with every malformed line reported by file and line number
(:class:`RecordsError`), except the torn lines a killed process leaves.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from rlearn.trace.recorder import RECORDS_VERSION, PathLike
from rlearn.values import is_int, is_real

__all__ = ["Session", "RecordsFile", "RecordsError", "read_records"]


class RecordsError(ValueError):
    """Trace records that are corrupt (the message names the file and line) or cannot be merged as asked."""


@dataclass
class Session:
    """One recording session of one rank: its header and the records that follow it."""

    header: Dict[str, Any]
    spans: List[Dict[str, Any]] = field(default_factory=list)
    counters: List[Dict[str, Any]] = field(default_factory=list)
    clock_offset_ns: int = 0
    clock_error_ns: int = 0

    @property
    def rank(self) -> int:
        return int(self.header["rank"])

    def to_wall_ns(self, mono_ns: int) -> int:
        """A monotonic time of this recording as rank 0's wall clock (anchor plus clock-offset correction)."""
        return self.header["anchor_wall_ns"] + (mono_ns - self.header["anchor_mono_ns"]) - self.clock_offset_ns


@dataclass
class RecordsFile:
    """Everything read from one ``rank<r>.jsonl`` file."""

    path: Path
    sessions: List[Session]
    torn_lines: int = 0  # partially written lines (a process killed mid-write) that were skipped


_HEADER_KEYS = ("rank", "pid", "anchor_wall_ns", "anchor_mono_ns")
#: how a header line the tracer started to write begins
_TORN_HEADER = b'{"type":"header"'


def read_records(path: PathLike) -> RecordsFile:
    """Parse one records file. A line that is not JSON is accepted only where a crash can leave one (the last
    line, or right before a header; in a file without a session only the start of a header); anything else
    malformed raises :class:`RecordsError` naming the file and line number."""
    path = Path(path)
    raw_lines = path.read_bytes().split(b"\n")
    sessions: List[Session] = []
    torn = 0
    pending_torn: Optional[int] = None  # line number of an unparsable line awaiting its excuse
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            record = None
        kind = record.get("type") if isinstance(record, dict) else None
        if pending_torn is not None:  # only a new session's header excuses an unreadable line before it
            if kind != "header":
                raise RecordsError(f"{path}:{pending_torn}: unreadable record (not JSON)")
            torn += 1
            pending_torn = None
        if not isinstance(record, dict):
            pending_torn = number
            continue
        where = f"{path}:{number}"
        if kind == "header":
            missing = [key for key in _HEADER_KEYS if not is_int(record.get(key))]
            if missing:
                raise RecordsError(f"{where}: header lacks integer field(s) {missing}")
            version = record.get("version", RECORDS_VERSION)
            if not is_int(version) or version > RECORDS_VERSION:
                raise RecordsError(f"{where}: records format version {version!r} is newer than this rlearn "
                                   f"reads ({RECORDS_VERSION}); upgrade rlearn")
            session = Session(header=record)
            sessions.append(session)
            if "clock_offset_ns" in record:
                session.clock_offset_ns = _int_field(record, "clock_offset_ns", where)
                session.clock_error_ns = _int_field(record, "clock_error_ns", where)
            continue
        if not sessions:
            raise RecordsError(f"{where}: record before any header")
        session = sessions[-1]
        if kind == "span":
            if _int_field(record, "start", where) > _int_field(record, "end", where):
                raise RecordsError(f"{where}: span ends before it starts")
            if not isinstance(record.get("name"), str) or not isinstance(record.get("lane"), str):
                raise RecordsError(f"{where}: span needs string 'name' and 'lane'")
            if not isinstance(record.get("args", {}), dict):
                raise RecordsError(f"{where}: span 'args' must be an object")
            session.spans.append(record)
        elif kind == "counter":
            _int_field(record, "t", where)
            value = record.get("value")
            if not is_real(value) or not math.isfinite(value):
                raise RecordsError(f"{where}: counter value must be a finite number, got {value!r}")
            if not isinstance(record.get("name"), str):
                raise RecordsError(f"{where}: counter needs a string 'name'")
            session.counters.append(record)
        elif kind == "clock_offset":
            session.clock_offset_ns = _int_field(record, "offset_ns", where)
            session.clock_error_ns = _int_field(record, "error_ns", where)
        else:
            raise RecordsError(f"{where}: unknown record type {kind!r}")
    if pending_torn is not None:
        if not sessions and not raw_lines[pending_torn - 1].lstrip().startswith(_TORN_HEADER):
            raise RecordsError(f"{path}:{pending_torn}: not a trace records file (the line is not a JSON record, "
                               "and the file has no recording session)")
        torn += 1  # the torn last line of a killed process
    return RecordsFile(path=path, sessions=sessions, torn_lines=torn)


def _int_field(record: Mapping[str, Any], key: str, where: str) -> int:
    value = record.get(key)
    if not is_int(value):
        raise RecordsError(f"{where}: field {key!r} must be an integer, got {value!r}")
    return value
