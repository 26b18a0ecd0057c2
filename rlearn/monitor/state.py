"""Validation of a ``TickMonitor`` state dict (version 2, and version 1 as saved by earlier rlearn).

Format (plain Python types, bounded by the window sizes)::

    {"version": 2, "tick_count": int, "window_size": int, "window_sizes": {key: int},
     "keys": [{"key": str, "entries": [entry, ...], "edge": entry (optional), "last": float | None,
               "nonfinite_total": int}, ...],
     "tracked": {key: {"windows": {"<size>": [entry, ...]}, "last_n": {"n", "values", "tick", "at_tick"} | None,
                       "since_start": {"before": stat, "tick": int, "current": stat} | None}}}

An entry is one tick's aggregate ``[tick, sum, count, min, max, nonfinite, sum_of_squares, last]``
(version 1: the first six; the last two are then derived as ``sum^2/count`` and ``sum/count``, exact
when the tick had one value). ``edge`` is the tick that left the window at the last ``tick()``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from rlearn.monitor.tracked import LastN, SinceStart
from rlearn.monitor.window import INF, Entry, KeyWindow, Stat

__all__ = ["STATE_VERSION", "parse_state", "positive_int", "check_key"]

STATE_VERSION = 2


def positive_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return int(value)


def check_key(key: Any) -> None:
    if not isinstance(key, str):
        raise TypeError(f"monitor keys must be strings, got {type(key).__name__}: {key!r}")
    if not key:
        raise ValueError("monitor keys must be non-empty strings, got ''")


def _error(message: str) -> ValueError:
    return ValueError(f"TickMonitor.load_state_dict: {message}")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_float(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def parse_state(state: Any, make_tracked: Callable[[], Any]) -> Tuple[int, int, Dict[str, int], Dict[str, KeyWindow], Dict[str, Optional[float]], Dict[str, Any]]:
    """Validate a state dict and build the windows; raises before touching any monitor."""
    if not isinstance(state, Mapping):
        raise TypeError(f"TickMonitor.load_state_dict expects a dict, got {type(state).__name__}")
    missing = [field for field in ("tick_count", "window_size", "window_sizes", "keys") if field not in state]
    if missing:
        raise _error(f"not a TickMonitor state: missing {', '.join(repr(m) for m in missing)}")
    version = state.get("version", 1)
    if version not in (1, STATE_VERSION):
        raise _error(f"unsupported state version {version!r} (this rlearn reads versions 1 and {STATE_VERSION})")
    tick = state["tick_count"]
    if not _is_int(tick) or tick < 0:
        raise _error(f"'tick_count' must be an int >= 0, got {tick!r}")
    tick = int(tick)
    try:
        default_size = positive_int("'window_size'", state["window_size"])
    except ValueError as exc:
        raise _error(str(exc)) from None
    raw_sizes = state["window_sizes"]
    if not isinstance(raw_sizes, Mapping):
        raise _error(f"'window_sizes' must be a dict key -> int, got {type(raw_sizes).__name__}")
    sizes: Dict[str, int] = {}
    for key, size in raw_sizes.items():
        if not isinstance(key, str) or not key:
            raise _error(f"'window_sizes' has a bad key {key!r}")
        try:
            sizes[key] = positive_int(f"window size of {key!r}", size)
        except ValueError as exc:
            raise _error(str(exc)) from None
    records = state["keys"]
    if not isinstance(records, (list, tuple)):
        raise _error(f"'keys' must be a list, got {type(records).__name__}")
    windows: Dict[str, KeyWindow] = {}
    lasts: Dict[str, Optional[float]] = {}
    for index, record in enumerate(records):
        if not isinstance(record, Mapping) or "key" not in record:
            raise _error(f"'keys[{index}]' must be a dict with a 'key', got {record!r}")
        key = record["key"]
        if not isinstance(key, str) or not key:
            raise _error(f"'keys[{index}]' has a bad key name {key!r}")
        if key in windows:
            raise _error(f"key {key!r} appears twice")
        size = sizes.get(key, default_size)
        last = record.get("last")
        if last is not None and not _is_float(last):
            raise _error(f"key {key!r}: 'last' must be a number or None, got {last!r}")
        total_bad = record.get("nonfinite_total", 0)
        if not _is_int(total_bad) or total_bad < 0:
            raise _error(f"key {key!r}: 'nonfinite_total' must be an int >= 0, got {total_bad!r}")
        entries = _parse_entries(f"key {key!r}", record.get("entries"), tick, size)
        if record.get("edge") is not None:
            edge = _parse_entry(f"key {key!r} edge", record["edge"], tick, size + 1)
            if edge[0] != tick - size:
                raise _error(f"key {key!r}: 'edge' must be at tick {tick - size}, got {edge[0]}")
            entries.insert(0, edge)
        if entries and last is None:
            raise _error(f"key {key!r}: has values in its window but no 'last' value")
        window_bad = sum(entry[5] for entry in entries)
        if window_bad > total_bad:
            raise _error(
                f"key {key!r}: 'nonfinite_total' ({total_bad}) is smaller than the window's non-finite count ({window_bad})"
            )
        window = KeyWindow(size, tick)
        window.load_entries(entries, tick)
        window.total_bad = int(total_bad)
        windows[key] = window
        lasts[key] = None if last is None else float(last)
    tracked = _parse_tracked(state.get("tracked", {}), tick, make_tracked)
    return tick, default_size, sizes, windows, lasts, tracked


def _parse_entries(where: str, raw_entries: Any, tick: int, size: int) -> List[Entry]:
    if not isinstance(raw_entries, (list, tuple)):
        raise _error(f"{where}: 'entries' must be a list, got {type(raw_entries).__name__}")
    entries = [_parse_entry(f"{where} entry {i}", raw, tick, size) for i, raw in enumerate(raw_entries)]
    for i in range(1, len(entries)):
        if entries[i][0] <= entries[i - 1][0]:
            raise _error(f"{where}: entry ticks must increase, got {entries[i - 1][0]} then {entries[i][0]}")
    return entries


def _parse_entry(where: str, raw: Any, tick: int, size: int) -> Entry:
    if not isinstance(raw, (list, tuple)) or len(raw) not in (6, 8):
        raise _error(f"{where}: expected [tick, sum, count, min, max, nonfinite, sumsq, last], got {raw!r}")
    entry_tick, total, count, low, high, bad = raw[:6]
    if not _is_int(entry_tick) or not tick - size < entry_tick <= tick:
        raise _error(f"{where}: tick {entry_tick!r} is not in the window ({tick - size}, {tick}] of size {size} at tick {tick}")
    if not _is_int(count) or count < 0 or not _is_int(bad) or bad < 0 or count + bad == 0:
        raise _error(f"{where}: count and nonfinite must be ints >= 0, not both 0; got {count!r}, {bad!r}")
    if not all(_is_float(v) for v in (total, low, high)):
        raise _error(f"{where}: sum, min and max must be numbers, got {total!r}, {low!r}, {high!r}")
    total, low, high = float(total), float(low), float(high)
    if len(raw) == 8:
        squares, last = raw[6], raw[7]
        if not _is_float(squares) or not _is_float(last):
            raise _error(f"{where}: sumsq and last must be numbers, got {squares!r}, {last!r}")
        squares, last = float(squares), float(last)
    else:  # version 1: exact when the tick had one value
        squares, last = (total * total / count, total / count) if count else (0.0, 0.0)
    if count:
        if not all(math.isfinite(v) for v in (total, low, high, squares, last)) or low > high:
            raise _error(f"{where}: sum/min/max must be finite with min <= max, got {total}, {low}, {high}")
    elif total != 0.0 or low != INF or high != -INF:
        raise _error(f"{where}: without finite values sum/min/max must be 0, inf, -inf; got {total}, {low}, {high}")
    return (int(entry_tick), total, int(count), low, high, int(bad), squares, last)


def _parse_stat(where: str, raw: Any) -> Stat:
    if not isinstance(raw, (list, tuple)) or len(raw) != 7:
        raise _error(f"{where}: expected [sum, count, min, max, nonfinite, sumsq, last], got {raw!r}")
    total, count, low, high, bad, squares, last = raw
    if not (_is_int(count) and count >= 0 and _is_int(bad) and bad >= 0):
        raise _error(f"{where}: count and nonfinite must be ints >= 0, got {count!r}, {bad!r}")
    if not all(_is_float(v) for v in (total, low, high, squares)) or not (last is None or _is_float(last)):
        raise _error(f"{where}: sum, min, max, sumsq and last must be numbers, got {raw!r}")
    return (float(total), int(count), float(low), float(high), int(bad), float(squares), None if last is None else float(last))


def _parse_tracked(raw: Any, tick: int, make_tracked: Callable[[], Any]) -> Dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise _error(f"'tracked' must be a dict, got {type(raw).__name__}")
    out: Dict[str, Any] = {}
    for key, record in raw.items():
        where = f"tracked {key!r}"
        if not isinstance(key, str) or not key or not isinstance(record, Mapping):
            raise _error(f"{where}: expected a key -> dict, got {record!r}")
        tracked = make_tracked()
        raw_windows = record.get("windows", {})
        if not isinstance(raw_windows, Mapping):
            raise _error(f"{where}: 'windows' must be a dict")
        for size_text, raw_entries in raw_windows.items():
            try:
                size = positive_int(f"{where} window size", int(size_text))
            except (TypeError, ValueError) as exc:
                raise _error(f"{where}: bad window size {size_text!r} ({exc})") from None
            window = KeyWindow(size, tick)
            window.load_entries(_parse_entries(f"{where} window {size}", raw_entries, tick, size + 1), tick)
            tracked.windows[size] = window
        ring = record.get("last_n")
        if ring is not None:
            if not isinstance(ring, Mapping) or not {"n", "values", "tick", "at_tick"} <= ring.keys():
                raise _error(f"{where}: 'last_n' must be a dict with n, values, tick, at_tick")
            n = positive_int(f"{where} last_n n", ring["n"])
            values = ring["values"]
            if not isinstance(values, (list, tuple)) or len(values) > n or not all(_is_float(v) for v in values):
                raise _error(f"{where}: 'last_n' values must be a list of at most {n} numbers")
            if not _is_int(ring["tick"]) or not _is_int(ring["at_tick"]) or ring["at_tick"] < 0:
                raise _error(f"{where}: 'last_n' tick and at_tick must be ints")
            tracked.last_n = LastN(n, [float(v) for v in values], int(ring["tick"]), int(ring["at_tick"]))
        since = record.get("since_start")
        if since is not None:
            if not isinstance(since, Mapping) or not _is_int(since.get("tick")):
                raise _error(f"{where}: 'since_start' must be a dict with before, tick, current")
            tracked.since_start = SinceStart(
                _parse_stat(f"{where} since_start before", since.get("before")),
                int(since["tick"]),
                _parse_stat(f"{where} since_start current", since.get("current")),
            )
        out[key] = tracked
    return out
