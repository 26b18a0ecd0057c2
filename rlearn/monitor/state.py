"""Validation of a ``TickMonitor`` state dict (format: docs/monitoring.md, "Saving and restoring"): every check
runs before the monitor is touched, and a failed one raises ``ValueError`` naming the field."""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional, Tuple

from rlearn.monitor.window import KeyWindow, LastN, SinceStart, WindowStat
from rlearn.values import is_int, is_real

__all__ = ["STATE_VERSION", "parse_state"]

STATE_VERSION = 4


def _fail(message: str) -> ValueError:
    return ValueError(f"TickMonitor.load_state_dict: {message}")


def _check(ok: Any, message: str) -> None:
    if not ok:
        raise _fail(message)


def _size(what: str, value: Any) -> int:
    _check(is_int(value) and value >= 1, f"{what} must be a positive int, got {value!r}")
    return int(value)


def _name(key: Any, where: str) -> str:
    _check(isinstance(key, str) and key, f"{where} has a bad key name {key!r}")
    return key


def parse_state(state: Any) -> Tuple[int, int, Dict[str, int], Dict[str, KeyWindow], Dict[str, Optional[float]],
                                     Dict[str, Dict[Any, Any]]]:
    """``(tick, default size, sizes, windows, last values, kept stores)`` of a valid state dict."""
    if not isinstance(state, Mapping):
        raise TypeError(f"TickMonitor.load_state_dict expects a dict, got {type(state).__name__}")
    missing = [repr(field) for field in ("tick_count", "window_size", "window_sizes", "keys") if field not in state]
    _check(not missing, f"not a TickMonitor state: missing {', '.join(missing)}")
    version = state.get("version")
    _check(version == STATE_VERSION,
           f"unsupported state version {version!r} (this rlearn reads version {STATE_VERSION})")
    tick, sizes, records = state["tick_count"], state["window_sizes"], state["keys"]
    _check(is_int(tick) and tick >= 0, f"'tick_count' must be an int >= 0, got {tick!r}")
    tick, default_size = int(tick), _size("'window_size'", state["window_size"])
    _check(isinstance(sizes, Mapping), f"'window_sizes' must be a dict key -> int, got {type(sizes).__name__}")
    sizes = {_name(key, "'window_sizes'"): _size(f"window size of {key!r}", size) for key, size in sizes.items()}
    _check(isinstance(records, (list, tuple)), f"'keys' must be a list, got {type(records).__name__}")
    windows: Dict[str, KeyWindow] = {}
    lasts: Dict[str, Optional[float]] = {}
    for index, record in enumerate(records):
        _check(isinstance(record, Mapping) and "key" in record,
               f"'keys[{index}]' must be a dict with a 'key', got {record!r}")
        key = _name(record["key"], f"'keys[{index}]'")
        _check(key not in windows, f"key {key!r} appears twice")
        last, total_bad = record.get("last"), record.get("nonfinite_total", 0)
        _check(last is None or is_real(last), f"key {key!r}: 'last' must be a number or None, got {last!r}")
        _check(is_int(total_bad) and total_bad >= 0,
               f"key {key!r}: 'nonfinite_total' must be an int >= 0, got {total_bad!r}")
        window = windows[key] = _window(f"key {key!r}", record, tick, sizes.get(key, default_size))
        _check(last is not None or len(window.vals) == window.total_bad,
               f"key {key!r}: has values in its window but no 'last' value")
        _check(window.total_bad <= total_bad, f"key {key!r}: 'nonfinite_total' ({total_bad}) is smaller than the "
                                              f"window's non-finite count ({window.total_bad})")
        window.total_bad = int(total_bad)
        lasts[key] = None if last is None else float(last)
    return tick, default_size, sizes, windows, lasts, _kept(state.get("tracked", {}), tick)


def _window(where: str, record: Mapping[str, Any], tick: int, size: int) -> KeyWindow:
    """The window a state record describes: ``values`` (``[tick, finite value]``) and ``nonfinite`` (ticks)."""
    pairs, bad = record.get("values", []), record.get("nonfinite", [])
    _check(isinstance(pairs, (list, tuple)) and isinstance(bad, (list, tuple)),
           f"{where}: 'values' and 'nonfinite' must be lists")
    for i, pair in enumerate(pairs):  # the messages are built only for a bad entry: a window may be long
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and is_int(pair[0]) and is_real(pair[1])
                and math.isfinite(pair[1])):
            raise _fail(f"{where} value {i}: expected [tick, finite number], got {pair!r}")
    for what, ticks in (("value", [t for t, _ in pairs]), ("nonfinite", bad)):
        for i, t in enumerate(ticks):
            if not is_int(t) or not tick - size <= t <= tick:
                raise _fail(f"{where} {what} {i}: tick {t!r} is not in the window [{tick - size}, {tick}] of size "
                            f"{size} at tick {tick}")
            if i and t < ticks[i - 1]:
                raise _fail(f"{where}: {what} ticks must not decrease, got {ticks[i - 1]} then {t}")
    window = KeyWindow(size)  # its total_bad counts the loaded NaN/inf
    items = [*((int(t), float(v)) for t, v in pairs), *((int(t), math.nan) for t in bad)]
    for t, v in sorted(items, key=lambda item: item[0]):  # stable: a tick's values in their order
        window.add(t, v)
    return window


def _stat(where: str, raw: Any) -> WindowStat:
    """A ``WindowStat.state()`` list read back."""
    _check(isinstance(raw, (list, tuple)) and len(raw) == 8,
           f"{where}: expected [sum, count, min, max, nonfinite, sumsq, last, sum_lo], got {raw!r}")
    total, count, low, high, bad, squares, last, low_part = raw
    _check(is_int(count) and count >= 0 and is_int(bad) and bad >= 0,
           f"{where}: count and nonfinite must be ints >= 0, got {count!r}, {bad!r}")
    extremes = (low, high, last)
    _check(all(is_real(v) for v in (total, squares, low_part) + (extremes if count else ()))
           and (count or extremes == (None, None, None)),
           f"{where}: sum, sumsq, sum_lo (and with values min, max, last) must be numbers, got {raw!r}")
    if not count:
        return WindowStat(0.0, 0, None, None, int(bad))
    return WindowStat(float(total), int(count), float(low), float(high), int(bad), float(squares), float(last), None,
                      float(low_part))


def _kept(raw: Any, tick: int) -> Dict[str, Dict[Any, Any]]:
    """What ``keep`` asked for, per key (``TickMonitor._kept``), from the state's ``tracked``."""
    _check(isinstance(raw, Mapping), f"'tracked' must be a dict, got {type(raw).__name__}")
    for key, record in raw.items():
        _check(isinstance(key, str) and key and isinstance(record, Mapping),
               f"tracked {key!r}: expected a key -> dict, got {record!r}")
    return {key: dict(_store(f"tracked {key!r}", name, store, tick) for name, store in record.items())
            for key, record in raw.items()}


def _store(where: str, name: Any, raw: Any, tick: int) -> Tuple[Any, Any]:
    """``(name, store)`` of a kept store's state: a window (its size as text), ``last_n`` or ``since_start``."""
    _check(isinstance(raw, Mapping), f"{where} {name}: expected a dict, got {raw!r}")
    if name == "last_n":
        n, pairs = _size(f"{where} last_n n", raw.get("n")), raw.get("values")
        _check(isinstance(pairs, (list, tuple)) and len(pairs) <= n and all(
            isinstance(p, (list, tuple)) and len(p) == 2 and is_int(p[0]) and p[0] <= tick and is_real(p[1])
            for p in pairs), f"{where}: 'last_n' values must be at most {n} [tick <= {tick}, number] pairs")
        return name, LastN(n, [(int(t), float(v)) for t, v in pairs])
    if name == "since_start":
        _check(is_int(raw.get("tick")), f"{where}: 'since_start' must be a dict with before, tick, current")
        before, current = (_stat(f"{where} since_start {part}", raw.get(part)) for part in ("before", "current"))
        return name, SinceStart(before, int(raw["tick"]), current)
    size = int(name) if isinstance(name, str) and name.isdecimal() else 0
    _check(size, f"{where}: {name!r} is neither last_n, since_start nor a window size (a positive int)")
    return size, _window(f"{where} window {size}", raw, tick, size)
