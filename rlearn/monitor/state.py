"""Validation of a ``TickMonitor`` state dict (format: docs/monitoring.md, "Saving and restoring")."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

from rlearn.config.spec import is_int, is_real
from rlearn.monitor.scalars import check_key
from rlearn.monitor.window import KeyWindow, LastN, SinceStart, Tracked, WindowStat

__all__ = ["STATE_VERSION", "parse_state", "positive_int", "check_key"]

STATE_VERSION = 3


def positive_int(what: str, value: Any) -> int:
    if not is_int(value) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return int(value)


def _error(message: str) -> ValueError:
    return ValueError(f"TickMonitor.load_state_dict: {message}")


def parse_state(state: Any) -> Tuple[int, int, Dict[str, int], Dict[str, KeyWindow], Dict[str, Optional[float]], Dict[str, Any]]:
    """Validate a state dict and build the windows; raises before touching any monitor."""
    if not isinstance(state, Mapping):
        raise TypeError(f"TickMonitor.load_state_dict expects a dict, got {type(state).__name__}")
    missing = [field for field in ("tick_count", "window_size", "window_sizes", "keys") if field not in state]
    if missing:
        raise _error(f"not a TickMonitor state: missing {', '.join(repr(m) for m in missing)}")
    if state.get("version") != STATE_VERSION:
        raise _error(f"unsupported state version {state.get('version')!r} (this rlearn reads version {STATE_VERSION})")
    tick = state["tick_count"]
    if not is_int(tick) or tick < 0:
        raise _error(f"'tick_count' must be an int >= 0, got {tick!r}")
    tick = int(tick)
    try:
        default_size = positive_int("'window_size'", state["window_size"])
        if not isinstance(state["window_sizes"], Mapping):
            raise ValueError(f"'window_sizes' must be a dict key -> int, got {type(state['window_sizes']).__name__}")
        sizes = {_name(key, "'window_sizes'"): positive_int(f"window size of {key!r}", size)
                 for key, size in state["window_sizes"].items()}
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
        key = _name(record["key"], f"'keys[{index}]'")
        if key in windows:
            raise _error(f"key {key!r} appears twice")
        last, total_bad = record.get("last"), record.get("nonfinite_total", 0)
        if last is not None and not is_real(last):
            raise _error(f"key {key!r}: 'last' must be a number or None, got {last!r}")
        if not is_int(total_bad) or total_bad < 0:
            raise _error(f"key {key!r}: 'nonfinite_total' must be an int >= 0, got {total_bad!r}")
        window = _window(f"key {key!r}", record, tick, sizes.get(key, default_size))
        if window.vals and last is None:
            raise _error(f"key {key!r}: has values in its window but no 'last' value")
        if window.total_bad > total_bad:
            raise _error(f"key {key!r}: 'nonfinite_total' ({total_bad}) is smaller than the window's non-finite count "
                         f"({window.total_bad})")
        window.total_bad = int(total_bad)
        windows[key] = window
        lasts[key] = None if last is None else float(last)
    return tick, default_size, sizes, windows, lasts, _parse_tracked(state.get("tracked", {}), tick)


def _name(key: Any, where: str) -> str:
    if not isinstance(key, str) or not key:
        raise _error(f"{where} has a bad key name {key!r}")
    return key


def _window(where: str, record: Mapping[str, Any], tick: int, size: int) -> KeyWindow:
    """The window a state record describes (``values``, ``nonfinite``)."""
    pairs, bad = record.get("values", []), record.get("nonfinite", [])
    if not isinstance(pairs, (list, tuple)) or not isinstance(bad, (list, tuple)):
        raise _error(f"{where}: 'values' and 'nonfinite' must be lists")
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and is_int(pair[0]) and is_real(pair[1])
                and math.isfinite(pair[1])):
            raise _error(f"{where} value {i}: expected [tick, finite number], got {pair!r}")
    pairs = [(int(t), float(v)) for t, v in pairs]
    for what, ticks in (("value", [t for t, _ in pairs]), ("nonfinite", bad)):
        for i, t in enumerate(ticks):
            if not is_int(t) or not tick - size <= t <= tick:
                raise _error(f"{where} {what} {i}: tick {t!r} is not in the window [{tick - size}, {tick}] of size {size} at tick {tick}")
            if i and t < ticks[i - 1]:
                raise _error(f"{where}: {what} ticks must not decrease, got {ticks[i - 1]} then {t}")
    return KeyWindow.load(size, tick, pairs, [int(t) for t in bad])


def _parse_stat(where: str, raw: Any) -> WindowStat:
    if not isinstance(raw, (list, tuple)) or len(raw) != 8:
        raise _error(f"{where}: expected [sum, count, min, max, nonfinite, sumsq, last, sum_lo], got {raw!r}")
    total, count, low, high, bad, squares, last, low_part = raw
    if not (is_int(count) and count >= 0 and is_int(bad) and bad >= 0):
        raise _error(f"{where}: count and nonfinite must be ints >= 0, got {count!r}, {bad!r}")
    numbers = (total, squares, low_part) + ((low, high, last) if count else ())
    if not all(is_real(v) for v in numbers) or not count and (low, high, last) != (None, None, None):
        raise _error(f"{where}: sum, sumsq, sum_lo (and with values min, max, last) must be numbers, got {raw!r}")
    if not count:
        return WindowStat(0.0, 0, None, None, int(bad))
    return WindowStat(float(total), int(count), float(low), float(high), int(bad), float(squares), float(last), None,
                      float(low_part))


def _parse_tracked(raw: Any, tick: int) -> Dict[str, Tracked]:
    if not isinstance(raw, Mapping):
        raise _error(f"'tracked' must be a dict, got {type(raw).__name__}")
    out: Dict[str, Any] = {}
    for key, record in raw.items():
        where = f"tracked {key!r}"
        if not isinstance(key, str) or not key or not isinstance(record, Mapping):
            raise _error(f"{where}: expected a key -> dict, got {record!r}")
        tracked = Tracked()
        raw_windows = record.get("windows", {})
        if not isinstance(raw_windows, Mapping):
            raise _error(f"{where}: 'windows' must be a dict")
        for size_text, window in raw_windows.items():
            try:
                size = positive_int(f"{where} window size", int(size_text))
            except (TypeError, ValueError) as exc:
                raise _error(f"{where}: bad window size {size_text!r} ({exc})") from None
            if not isinstance(window, Mapping):
                raise _error(f"{where} window {size}: expected a dict, got {window!r}")
            tracked.windows[size] = _window(f"{where} window {size}", window, tick, size)
        ring = record.get("last_n")
        if ring is not None:
            if not isinstance(ring, Mapping) or not {"n", "values", "tick", "at_tick"} <= ring.keys():
                raise _error(f"{where}: 'last_n' must be a dict with n, values, tick, at_tick")
            n = positive_int(f"{where} last_n n", ring["n"])
            values = ring["values"]
            if not isinstance(values, (list, tuple)) or len(values) > n or not all(is_real(v) for v in values):
                raise _error(f"{where}: 'last_n' values must be a list of at most {n} numbers")
            if not is_int(ring["tick"]) or not is_int(ring["at_tick"]) or ring["at_tick"] < 0:
                raise _error(f"{where}: 'last_n' tick and at_tick must be ints")
            tracked.last_n = LastN(n, [float(v) for v in values], int(ring["tick"]), int(ring["at_tick"]))
        since = record.get("since_start")
        if since is not None:
            if not isinstance(since, Mapping) or not is_int(since.get("tick")):
                raise _error(f"{where}: 'since_start' must be a dict with before, tick, current")
            tracked.since_start = SinceStart(_parse_stat(f"{where} since_start before", since.get("before")),
                                             int(since["tick"]), _parse_stat(f"{where} since_start current", since.get("current")))
        out[key] = tracked
    return out
