"""Structural validator for the Chrome Trace Event JSON that ``rlearn trace`` writes: what Perfetto and
chrome://tracing need to draw it correctly (see docs/timeline-traces.md, "The output format").
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Any, Dict, List, Mapping, Set, Tuple

from rlearn.trace.lanes import nests_in
from rlearn.trace.recorder import PathLike
from rlearn.values import is_int, is_real

ALLOWED_PHASES = ("X", "C", "M")
METADATA_NAMES = ("process_name", "process_sort_index", "thread_name", "thread_sort_index")


class TraceValidationError(ValueError):
    """A trace failed :func:`validate_trace`; ``problems`` lists every reason."""

    def __init__(self, problems: List[str]) -> None:
        self.problems = list(problems)
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"invalid trace ({len(problems)} problem(s)):\n  {shown}{more}")


def _is_number(value: Any) -> bool:
    return is_real(value) and math.isfinite(value)


def validate_trace(obj: Any) -> List[str]:
    """Every structural problem of a trace object, as readable messages (empty list: valid)."""
    if not isinstance(obj, Mapping):
        return [f"trace must be a JSON object with 'traceEvents', got {type(obj).__name__}"]
    events = obj.get("traceEvents")
    if not isinstance(events, list):
        return ["trace has no 'traceEvents' list"]
    problems: List[str] = []
    unit = obj.get("displayTimeUnit", "ms")
    if unit not in ("ms", "ns"):
        problems.append(f"displayTimeUnit must be 'ms' or 'ns', got {unit!r}")

    process_names: Set[int] = set()
    thread_names: Set[Tuple[int, int]] = set()
    used_pids: Dict[int, str] = {}
    tid_owner: Dict[int, int] = {}
    lanes: Dict[Tuple[int, int], List[Tuple[int, int, str]]] = {}

    for index, event in enumerate(events):
        if not isinstance(event, Mapping):
            problems.append(f"event {index}: not an object")
            continue
        phase = event.get("ph")
        name = event.get("name")
        where = f"event {index} ({phase} {name!r})"
        if phase not in ALLOWED_PHASES:
            problems.append(f"{where}: phase must be one of {ALLOWED_PHASES}")
            continue
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: needs a non-empty string 'name'")
        pid = event.get("pid")
        if not is_int(pid) or pid < 1:
            problems.append(f"{where}: pid must be a positive integer, got {pid!r}")
            continue
        tid = event.get("tid")
        if tid is not None or phase == "X":
            if not is_int(tid) or tid < 1:
                problems.append(f"{where}: tid must be a positive integer, got {tid!r}")
                continue
            owner = tid_owner.setdefault(tid, pid)
            if owner != pid:
                problems.append(f"{where}: tid {tid} is used by pid {owner} and pid {pid}")
        args = event.get("args")

        if phase == "M":
            if name not in METADATA_NAMES:
                problems.append(f"{where}: metadata name must be one of {METADATA_NAMES}")
                continue
            if not isinstance(args, Mapping):
                problems.append(f"{where}: metadata needs an 'args' object")
                continue
            if name.startswith("thread") and tid is None:
                problems.append(f"{where}: thread metadata needs a tid")
                continue
            if name.endswith("_name"):
                if not isinstance(args.get("name"), str) or not args.get("name"):
                    problems.append(f"{where}: args.name must be a non-empty string")
                elif name == "process_name":
                    process_names.add(pid)
                else:
                    thread_names.add((pid, tid))
            elif not is_int(args.get("sort_index")):
                problems.append(f"{where}: args.sort_index must be an integer")
            continue

        bad_times = [key for key in (("ts", "dur") if phase == "X" else ("ts",))
                     if not (_is_number(event.get(key)) and event[key] >= 0)]
        if bad_times:
            key = bad_times[0]
            problems.append(f"{where}: {key} must be a finite number >= 0, got {event.get(key)!r}")
            continue
        used_pids.setdefault(pid, where)
        if phase == "C":
            if not isinstance(args, Mapping) or not args:
                problems.append(f"{where}: counter needs a non-empty 'args' object")
            else:
                bad = {key: value for key, value in args.items() if not _is_number(value)}
                if bad:
                    problems.append(f"{where}: counter args must be finite numbers, got {bad!r}")
            continue
        if args is not None and not isinstance(args, Mapping):
            problems.append(f"{where}: args must be an object")
        start = round(event["ts"] * 1000)  # in integer nanoseconds
        lanes.setdefault((pid, tid), []).append((start, start + round(event["dur"] * 1000), where))

    for pid, where in used_pids.items():
        if pid not in process_names:
            problems.append(f"pid {pid} has no process_name metadata (first used by {where})")
    for (pid, tid), spans in lanes.items():
        if (pid, tid) not in thread_names:
            problems.append(f"pid {pid} tid {tid} has no thread_name metadata (first used by {spans[0][2]})")
        problems.extend(_nesting_problems(pid, tid, spans))
    return problems


def _nesting_problems(pid: int, tid: int, spans: List[Tuple[int, int, str]]) -> List[str]:
    """Pairs of spans on one lane that overlap without one containing the other."""
    problems: List[str] = []
    stack: List[Tuple[int, None, str]] = []  # as the viewer would draw it: an overlapping span is left out
    for start, end, where in sorted(spans, key=lambda s: (s[0], -s[1])):
        if nests_in(stack, start, end):
            stack.append((end, None, where))
        else:
            problems.append(f"pid {pid} tid {tid}: {where} overlaps {stack[-1][2]} without nesting in it")
    return problems


def check_trace(obj: Any) -> None:
    """Raise :class:`TraceValidationError` listing every problem of ``obj`` (returns if valid)."""
    problems = validate_trace(obj)
    if problems:
        raise TraceValidationError(problems)


def check_trace_file(path: PathLike) -> Dict[str, Any]:
    """Load a ``.json`` or ``.json.gz`` trace and validate it; return the trace, or raise
    :class:`TraceValidationError` (a problem with the file itself, or :func:`validate_trace`'s)."""
    path = Path(path)
    raw = path.read_bytes()
    gzipped = raw[:2] == b"\x1f\x8b"
    if path.name.endswith(".gz"):
        if not gzipped:
            raise TraceValidationError([f"{path}: name ends in .gz but the content is not gzip"])
        decompressor = zlib.decompressobj(wbits=31)
        try:
            raw = decompressor.decompress(raw)
        except zlib.error as exc:
            raise TraceValidationError([f"{path}: corrupt gzip data ({exc})"]) from None
        if not decompressor.eof:
            raise TraceValidationError([f"{path}: gzip stream is truncated"])
        if decompressor.unused_data:
            raise TraceValidationError([f"{path}: more than one gzip stream (viewers read only the first)"])
    elif gzipped:
        raise TraceValidationError([f"{path}: content is gzip but the name does not end in .gz"])
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceValidationError([f"{path}: not valid JSON ({exc})"]) from None
    check_trace(obj)
    return obj
