"""``TickMonitor``: the one store of monitored numbers, a sliding window of ticks per key (docs/monitoring.md).
The windows live in ``window.py``, the state dict is read back by ``state.py``."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Dict, List, Mapping, Optional, Sequence

from rlearn.config.spec import is_int
from rlearn.monitor import scalars
from rlearn.monitor.state import STATE_VERSION, check_key, parse_state, positive_int
from rlearn.monitor.window import EMPTY_STAT, INF, KeyWindow, Stat, Tracked, WindowStat

__all__ = ["TickMonitor"]

_ONLY_FLOAT = {float}


class TickMonitor:
    """Sliding-window statistics of sparse per-iteration metrics; one tick per train iteration.

    Args:
        window_size: default window, in ticks, of every key.
        window_sizes: per-key windows (``{"aux_loss": 50}``), overriding ``window_size``.

    A key's statistics look at the values recorded during its last ``window_size(key)`` ticks, the
    current one included; ``avg``/``min``/``max`` are None (never 0) without a finite value, NaN and inf
    are counted by :meth:`nonfinite`. ``end``, the last tick of a window, is None (the current tick) or
    ``tick_count - 1`` (the tick just completed); any other raises ``ValueError``. Example::

        monitor = TickMonitor(window_size=20)
        for it in range(40):               # one train iteration per tick
            info = {"loss": 1.0}
            if it % 10 == 0:               # a periodic key
                info["aux_loss"] = float(it)
            monitor.update(info)
            if it == 39:                   # log time: the window is ticks 20..39
                print(monitor.count("loss"), monitor.count("aux_loss"), monitor.avg("aux_loss"))  # 20 2 25.0
            monitor.tick()
    """

    def __init__(self, window_size: int = 20, window_sizes: Optional[Mapping[str, int]] = None) -> None:
        self._default_size = positive_int("TickMonitor window_size", window_size)
        self._sizes: Dict[str, int] = {}
        self._windows: Dict[str, KeyWindow] = {}
        self._last: Dict[str, Optional[float]] = {}
        self._tracked: Dict[str, Tracked] = {}
        self._tick = 0
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
        check_key(key)
        self._sizes[key] = size = positive_int(f"TickMonitor window size of {key!r}", size)
        self._resize(key, size)

    def set_default_window_size(self, size: int) -> None:
        """Set the window of every key without a window of its own (as :meth:`set_window_size` does)."""
        size = positive_int("TickMonitor window_size", size)
        for key in self._windows:
            if key not in self._sizes:
                self._resize(key, size)
        self._default_size = size

    def _resize(self, key: str, size: int) -> None:
        window = self._windows.get(key)
        if window is not None:
            now = self._tick
            # the ticks still in the old window, and the one before a shrunk window (for end=tick_count-1)
            first = max(now - window.size + 1, now - size)
            resized = KeyWindow.load(size, now, *window.dump(now, first))
            resized.total_bad = window.total_bad
            self._windows[key] = resized

    def keep(self, key: str, *, window: Optional[int] = None, last_n: Optional[int] = None,
             since_start: bool = False) -> None:
        """Make ``key`` keep, from now on, another tick ``window``, its ``last_n`` values or aggregates
        ``since_start`` (idempotent; saved by :meth:`state_dict`)."""
        check_key(key)
        if window is not None:
            window = positive_int(f"TickMonitor.keep window of {key!r}", window)
        if last_n is not None:
            last_n = positive_int(f"TickMonitor.keep last_n of {key!r}", last_n)
        self._tracked.setdefault(key, Tracked()).want(self._tick, window, last_n, since_start)

    def update(self, info: Mapping[str, Any]) -> None:
        """Record every value of ``info`` at the current tick (all count); a bad key or value raises,
        naming the key, before anything is recorded."""
        # the common case, a dict of Python floats for keys already seen (so valid keys), needs no check
        if type(info) is dict and set(map(type, info.values())) == _ONLY_FLOAT and info.keys() <= self._windows.keys():
            self._add(info.items(), info)
        else:
            if not isinstance(info, dict) and not isinstance(info, Mapping):  # dict first: the ABC check is slow
                raise TypeError(f"TickMonitor.update expects a dict of scalars, got {type(info).__name__}")
            items = scalars.to_floats(info.items(), check_key)
            self._add(items, items)

    def update_columns(self, columns: Mapping[str, Sequence[Any]]) -> None:
        """Record a list (or tuple) of values per key at the current tick, in order; all-or-nothing."""
        if not isinstance(columns, dict) and not isinstance(columns, Mapping):
            raise TypeError(f"TickMonitor.update_columns expects a dict key -> list of scalars, got {type(columns).__name__}")
        pairs = []
        for key, values in columns.items():
            if not isinstance(values, (list, tuple)):
                check_key(key)
                raise TypeError(f"TickMonitor.update_columns: the values of {key!r} must be a list or tuple, "
                                f"got {type(values).__name__}")
            pairs.extend((key, value) for value in values)
        items = scalars.to_floats(pairs, check_key)
        self._add(items, items)

    def _add(self, items: Any, recorded: Any) -> None:
        """Record validated ``(key, float)`` items (``recorded``: the same, for the last values)."""
        windows = self._windows
        tick = self._tick
        for key, value in items:
            window = windows.get(key)
            if window is None:
                window = windows[key] = KeyWindow(self._sizes.get(key, self._default_size), tick)
            if tick >= window.end or value - value:  # a new block, or NaN/inf (x - x is NaN: truthy)
                window.add(tick, value)
            else:  # window.add() inlined: this is the per-iteration hot path
                window.ticks.append(tick)
                window.vals.append(value)
        self._last.update(recorded)
        if self._tracked:
            tracked = self._tracked
            for key, value in items:
                if key in tracked:
                    tracked[key].add(tick, value)

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
        window = self._windows.get(key)
        if window is None:
            if end is not None:
                self._end(end)  # validated all the same
            return None
        now = self._tick
        if end is not None and (type(end) is not int or end != now) and self._end(end) != now:
            stat = window.stat(now, end)
            return stat[0] / stat[1] if stat[1] else None
        # the running sum of the open block plus the closed block's suffix sum: every log calls it for every key
        if now >= window.end:
            window.roll(now)
        vals = window.vals
        count = len(vals)
        done = window.o_sum_n
        if done == count:
            total = window.o_sum
        else:
            window.o_sum = total = window.o_sum + (vals[done] if done + 1 == count else sum(vals[done:]))
            window.o_sum_n = count
        c_ticks = window.c_ticks
        if c_ticks and c_ticks[-1] > now - window.size:
            first = bisect_right(c_ticks, now - window.size)
            suffix = window.c_suf or window._suffix_sums()
            total = suffix[first] + total
            count += len(c_ticks) - first
        return total / count if count else None

    def _stat(self, key: str, end: Optional[int]) -> Stat:
        end = self._end(end)
        window = self._windows.get(key)
        return EMPTY_STAT if window is None else window.stat(self._tick, end)

    def sum(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """Sum of the finite values of ``key`` in its window; None if there are none."""
        stat = self._stat(key, end)
        return stat[0] if stat[1] else None

    def min(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """Smallest finite value of ``key`` in its window; None if there are none."""
        low = self._stat(key, end)[2]
        return None if low == INF else low

    def max(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """Largest finite value of ``key`` in its window; None if there are none."""
        high = self._stat(key, end)[3]
        return None if high == -INF else high

    def count(self, key: str, end: Optional[int] = None) -> int:
        """Number of finite values of ``key`` in its window."""
        window = self._windows.get(key)
        if end is None and window is not None:
            return window.count(self._tick)
        return self._stat(key, end)[1]

    def nonfinite(self, key: str, end: Optional[int] = None) -> int:
        """Number of NaN/inf values of ``key`` in its window (they are left out of avg/min/max)."""
        end = self._end(end)
        window = self._windows.get(key)
        return 0 if window is None else window.nonfinite(self._tick, end)

    def nonfinite_total(self, key: str) -> int:
        """Number of NaN/inf values of ``key`` ever recorded (since construction or the loaded state)."""
        window = self._windows.get(key)
        return 0 if window is None else window.total_bad

    def last(self, key: str, end: Optional[int] = None) -> Optional[float]:
        """The most recent value of ``key`` (NaN/inf included; None if never recorded); with ``end``, the
        most recent finite value in the window ending there."""
        if end is None:
            return self._last.get(key)
        return self._stat(key, end)[6]

    def window_stat(self, key: str, end: Optional[int] = None, *, window: Optional[int] = None,
                    last_n: Optional[int] = None, since_start: bool = False) -> WindowStat:
        """The :class:`~rlearn.monitor.WindowStat` of ``key``'s own window ending at ``end``, or of what
        :meth:`keep` made it keep (``window=w`` ticks, its ``last_n`` values, ``since_start``); a window
        that was not kept raises ``ValueError`` naming the key."""
        end = self._end(end)
        store = self._kept(key, window, last_n, since_start)
        if store is None:
            stat = EMPTY_STAT
        elif last_n is not None:
            stat = store.stat(last_n, end)
        else:
            stat = store.stat(end) if since_start else store.stat(self._tick, end)
        return WindowStat.from_tuple(stat)

    def window_values(self, key: str, end: Optional[int] = None, *, window: Optional[int] = None,
                      last_n: Optional[int] = None) -> List[float]:
        """The finite values, oldest first, of the window :meth:`window_stat` reads."""
        end = self._end(end)
        store = self._kept(key, window, last_n, False)
        if store is None:
            return []
        return store.values(last_n, end) if last_n is not None else store.values(self._tick, end)

    def _kept(self, key: str, window: Optional[int], last_n: Optional[int], since_start: bool) -> Any:
        """What holds the window asked for (None: a key never recorded); ``ValueError`` if it was not kept."""
        if sum((window is not None, last_n is not None, bool(since_start))) > 1:
            raise ValueError(f"window_stat({key!r}): give at most one of window, last_n and since_start")
        tracked = self._tracked.get(key)
        if last_n is not None:
            if tracked is None or tracked.last_n is None or tracked.last_n.n < last_n:
                raise ValueError(f"TickMonitor: the last {last_n} values of {key!r} are not kept; call keep({key!r}, last_n={last_n})")
            return tracked.last_n
        if since_start:
            if tracked is None or tracked.since_start is None:
                raise ValueError(f"TickMonitor: {key!r} keeps no since-start aggregate; call keep({key!r}, since_start=True)")
            return tracked.since_start
        if window is None or window == self.window_size(key):
            return self._windows.get(key)
        if tracked is None or window not in tracked.windows:
            raise ValueError(f"TickMonitor: no window of {window} ticks kept for {key!r}; call keep({key!r}, window={window})")
        return tracked.windows[window]

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
        now = self._tick
        keys = []
        for key, window in self._windows.items():
            values, bad = window.dump(now, now - window.size)
            keys.append({"key": key, "values": values, "nonfinite": bad, "last": self._last.get(key),
                         "nonfinite_total": window.total_bad})
        tracked = {}
        for key, kept in self._tracked.items():
            tracked[key] = {
                "windows": {str(size): dict(zip(("values", "nonfinite"), w.dump(now, now - size)))
                            for size, w in kept.windows.items()},
                "last_n": None if kept.last_n is None else kept.last_n.state(),
                "since_start": None if kept.since_start is None else kept.since_start.state(),
            }
        return {"version": STATE_VERSION, "tick_count": now, "window_size": self._default_size,
                "window_sizes": dict(self._sizes), "keys": keys, "tracked": tracked}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` (of any version); what :meth:`keep` asked for stays kept. A malformed
        state raises ``ValueError`` naming the field and leaves the monitor unchanged."""
        tick, default_size, sizes, windows, lasts, tracked = parse_state(state)
        for key, kept in self._tracked.items():  # what was asked for before the load stays asked for
            loaded = tracked.setdefault(key, Tracked())
            for size in kept.windows:
                loaded.want(tick, window=size)
            loaded.want(tick, None, None if kept.last_n is None else kept.last_n.n, kept.since_start is not None)
        self._tick, self._default_size, self._sizes = tick, default_size, sizes
        self._windows, self._last, self._tracked = windows, lasts, tracked

