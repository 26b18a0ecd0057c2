"""``TickMonitor``: the one store of monitored numbers, a sliding window of ticks per key (docs/monitoring.md).
The windows live in ``window.py``, the state dict is read back by ``state.py``."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence

from rlearn.monitor.scalars import check_key, to_floats
from rlearn.monitor.state import STATE_VERSION, parse_state
from rlearn.monitor.window import EMPTY, KeyWindow, LastN, SinceStart, WindowStat
from rlearn.values import check_int, is_int

__all__ = ["TickMonitor"]


def _want(kept: Dict[Any, Any], window: Optional[int], last_n: Optional[int], since_start: bool) -> None:
    """Make ``kept`` (what a key keeps beyond its own window: window size / ``"last_n"`` / ``"since_start"`` ->
    its store) hold a ``window`` of that many ticks, the last ``last_n`` values, aggregates ``since_start``."""
    if window is not None and window not in kept:
        kept[window] = KeyWindow(window)
    ring = kept.get("last_n")
    if last_n is not None and (ring is None or ring.n < last_n):  # a longer ring keeps the values of the shorter
        kept["last_n"] = LastN(last_n, () if ring is None else ring.ring)
    if since_start and "since_start" not in kept:
        kept["since_start"] = SinceStart()


class TickMonitor:
    """Sliding-window statistics of sparse per-iteration metrics; one tick per train iteration.

    Args:
        window_size: default window, in ticks, of every key.
        window_sizes: per-key windows (``{"aux_loss": 50}``), overriding ``window_size``.

    A key's statistics cover the values recorded during its last ``window_size(key)`` ticks, the current one
    included; ``avg``/``min``/``max`` are None (never 0) without a finite value, NaN/inf are counted apart
    (:meth:`nonfinite`). ``end`` is None (the current tick) or ``tick_count - 1``. Recording and
    :meth:`state_dict` may run in different threads. Example: docs/monitoring.md.
    """

    def __init__(self, window_size: int = 20, window_sizes: Optional[Mapping[str, int]] = None) -> None:
        self._default_size = check_int("TickMonitor window_size", window_size)
        self._sizes: Dict[str, int] = {}
        self._windows: Dict[str, KeyWindow] = {}
        self._last: Dict[str, Optional[float]] = {}
        self._kept: Dict[str, Dict[Any, Any]] = {}  # key -> what keep() asked for (see _want)
        self._tick = 0
        self._lock = threading.RLock()  # recording (any thread) against state_dict / load_state_dict
        if window_sizes is not None:
            if not isinstance(window_sizes, Mapping):
                raise TypeError(f"TickMonitor window_sizes must be a mapping key -> int, got {window_sizes!r}")
            for key, size in window_sizes.items():
                self.set_window_size(key, size)

    @property
    def tick_count(self) -> int:
        """Ticks completed so far, which is also the index of the current tick."""
        return self._tick

    def tick(self) -> None:
        """Advance the clock by one tick (call it once per train iteration, after recording)."""
        self._tick += 1

    def window_size(self, key: str) -> int:
        """The window of ``key``, in ticks."""
        return self._sizes.get(key, self._default_size)

    @property
    def default_window_size(self) -> int:
        """The window, in ticks, of every key without a window of its own."""
        return self._default_size

    def set_window_size(self, key: str, size: int) -> None:
        """Set the window of ``key``; growing brings back no value that had already left the old one."""
        self._sizes[check_key(key)] = size = check_int(f"TickMonitor window size of {key!r}", size)
        self._resize(key, size)

    def set_default_window_size(self, size: int) -> None:
        """Set the window of every key without a window of its own (as :meth:`set_window_size` does)."""
        size = check_int("TickMonitor window_size", size)
        for key in list(self._windows):
            if key not in self._sizes:
                self._resize(key, size)
        self._default_size = size

    def _resize(self, key: str, size: int) -> None:
        with self._lock:
            if key in self._windows:
                self._windows[key].resize(size, self._tick)

    def keep(self, key: str, *, window: Optional[int] = None, last_n: Optional[int] = None,
             since_start: bool = False) -> None:
        """Make ``key`` keep, from now on, another tick ``window``, its ``last_n`` values or aggregates
        ``since_start`` (idempotent; saved by :meth:`state_dict`)."""
        check_key(key)
        window = check_int(f"TickMonitor.keep window of {key!r}", window, optional=True)
        last_n = check_int(f"TickMonitor.keep last_n of {key!r}", last_n, optional=True)
        with self._lock:
            _want(self._kept.setdefault(key, {}), window, last_n, since_start)

    def update(self, info: Mapping[str, Any]) -> None:
        """Record every value of ``info`` at the current tick (all count); a bad key or value raises,
        naming the key, before anything is recorded. Tensors: one host copy per device."""
        if type(info) is not dict and not isinstance(info, Mapping):  # the ABC check is slow: a dict first
            raise TypeError(f"TickMonitor.update expects a dict of scalars, got {type(info).__name__}")
        self._add(to_floats(info.items(), self._windows))

    def update_columns(self, columns: Mapping[str, Sequence[Any]]) -> None:
        """Record a list (or tuple) of values per key at the current tick, in order; all-or-nothing."""
        if not isinstance(columns, Mapping):
            raise TypeError("TickMonitor.update_columns expects a dict key -> list of scalars, "
                            f"got {type(columns).__name__}")
        pairs = []
        for key, values in columns.items():
            if not isinstance(values, (list, tuple)):
                check_key(key)
                raise TypeError(f"TickMonitor.update_columns: the values of {key!r} must be a list or tuple, "
                                f"got {type(values).__name__}")
            pairs.extend((key, value) for value in values)
        self._add(to_floats(pairs, self._windows))

    def _add(self, items: List[Any]) -> None:
        """Record checked ``(key, float)`` items at the current tick."""
        tick, windows, kept = self._tick, self._windows, self._kept
        with self._lock:
            for key, value in items:
                window = windows.get(key)
                if window is None:
                    window = windows[key] = KeyWindow(self._sizes.get(key, self._default_size))
                window.add(tick, value)
                if kept and key in kept:
                    for store in kept[key].values():
                        store.add(tick, value)
            self._last.update(items)

    def _end(self, end: Optional[int]) -> int:
        if end is None:
            return self._tick
        if is_int(end) and self._tick - 1 <= end <= self._tick:
            return int(end)
        raise ValueError(
            f"TickMonitor: end={end!r} is not a valid last tick of a window; use None or tick_count "
            f"({self._tick}) for the current tick, or tick_count - 1 ({self._tick - 1}) for the previous one"
        )

    def avg(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """Mean of the finite values of ``key`` in its window; None if there are none (never 0)."""
        return self.window_stat(key, end).avg

    def sum(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """Sum of the finite values of ``key`` in its window; None if there are none."""
        stat = self.window_stat(key, end)
        return stat.sum + stat.sum_lo if stat.count else None

    def min(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """Smallest finite value of ``key`` in its window; None if there are none."""
        return self.window_stat(key, end).min

    def max(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """Largest finite value of ``key`` in its window; None if there are none."""
        return self.window_stat(key, end).max

    def count(self, key: str, end: Optional[int] = None) -> int:
        """Number of finite values of ``key`` in its window."""
        return self.window_stat(key, end).count

    def nonfinite(self, key: str, end: Optional[int] = None) -> int:
        """Number of NaN/inf values of ``key`` in its window (they are left out of avg/min/max)."""
        return self.window_stat(key, end).nonfinite

    def nonfinite_total(self, key: str) -> int:
        """Number of NaN/inf values of ``key`` ever recorded (since construction or the loaded state)."""
        window = self._windows.get(key)
        return 0 if window is None else window.total_bad

    def last(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """The most recent value of ``key`` (NaN/inf included; None if never recorded); with ``end``, the
        most recent finite value in the window ending there."""
        return self._last.get(key) if end is None else self.window_stat(key, end).last

    def window_stat(self, key: str, end: Optional[int] = None, *, window: Optional[int] = None,
                    last_n: Optional[int] = None, since_start: bool = False) -> WindowStat:
        """The :class:`~rlearn.monitor.WindowStat` of ``key``'s own window ending at ``end``, or of what
        :meth:`keep` made it keep (``window=w`` ticks, its ``last_n`` values, ``since_start``); a window
        that was not kept raises ``ValueError`` naming the key."""
        if window is None and last_n is None and not since_start:  # the key's own window: what every log reads
            store = self._windows.get(key)
        else:
            store = self._store(key, window, last_n, since_start)
        if store is None:
            return EMPTY
        end = self._tick if end is None else self._end(end)
        with self._lock:
            return store.stat(end) if last_n is None else store.stat(end, last_n)

    def window_values(self, key: str, end: Optional[int] = None, *, window: Optional[int] = None,
                      last_n: Optional[int] = None) -> List[float]:
        """The finite values, oldest first, of the window :meth:`window_stat` reads."""
        end, store = self._end(end), self._store(key, window, last_n, False)
        if store is None:
            return []
        with self._lock:
            return store.values(end) if last_n is None else store.values(end, last_n)

    def _store(self, key: str, window: Optional[int], last_n: Optional[int], since_start: bool) -> Any:
        """What holds the window asked for (None: a key never recorded); ``ValueError`` if it was not kept."""
        if (window is not None) + (last_n is not None) + bool(since_start) > 1:
            raise ValueError(f"window_stat({key!r}): give at most one of window, last_n and since_start")
        if last_n is None and not since_start and window in (None, self.window_size(key)):
            return self._windows.get(key)
        name = "last_n" if last_n is not None else "since_start" if since_start else window
        store = self._kept.get(key, {}).get(name)
        if store is not None and (last_n is None or store.n >= last_n):
            return store
        if last_n is not None:
            missing = f"the last {last_n} values of {key!r} are not kept; call keep({key!r}, last_n={last_n})"
        elif since_start:
            missing = f"{key!r} keeps no since-start aggregate; call keep({key!r}, since_start=True)"
        else:
            missing = f"no window of {window} ticks kept for {key!r}; call keep({key!r}, window={window})"
        raise ValueError(f"TickMonitor: {missing}")

    def keys(self) -> List[str]:
        """Every key ever recorded, in first-seen order."""
        return list(self._windows)

    def __contains__(self, key: object) -> bool:
        return key in self._windows

    def __repr__(self) -> str:
        return f"TickMonitor(tick_count={self._tick}, window_size={self._default_size}, keys={self.keys()})"

    def state_dict(self) -> Dict[str, Any]:
        """The clock, the window sizes and every key's window values (those of the tick that just left it
        included) and what :meth:`keep` asked for, in plain Python types (docs/monitoring.md)."""
        with self._lock:
            now = self._tick
            keys = [{"key": key, **window.state(now), "last": self._last.get(key), "nonfinite_total": window.total_bad}
                    for key, window in self._windows.items()]
            tracked = {key: {str(name): store.state(now) for name, store in kept.items()}
                       for key, kept in self._kept.items()}
            return {"version": STATE_VERSION, "tick_count": now, "window_size": self._default_size,
                    "window_sizes": dict(self._sizes), "keys": keys, "tracked": tracked}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; what :meth:`keep` asked for stays kept. A malformed state raises
        ``ValueError`` naming the field and leaves the monitor unchanged."""
        tick, default_size, sizes, windows, lasts, kept = parse_state(state)
        with self._lock:
            for key, asked in self._kept.items():  # what was asked for before the load stays asked for
                for name, store in asked.items():
                    _want(kept.setdefault(key, {}), name if isinstance(name, int) else None,
                          store.n if name == "last_n" else None, name == "since_start")
            self._tick, self._default_size, self._sizes = tick, default_size, sizes
            self._windows, self._last, self._kept = windows, lasts, kept
