"""What a monitored key keeps: its tick window (:class:`KeyWindow`), on request other windows, its last
``n`` values (:class:`LastN`) and aggregates since the start (:class:`SinceStart`), gathered in
:class:`Tracked`; and a window's mergeable aggregate (:class:`WindowStat`).

A :class:`KeyWindow` holds an *open* block (values before ``end = start + size``, running aggregates) and
the previous, *closed* one, read from suffix aggregates: recording is two list appends, a query O(log size),
and nothing is subtracted, so sums do not drift (docs/monitoring.md).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rlearn.monitor.history_buffer import HistoryBuffer

__all__ = ["KeyWindow", "WindowStat", "LastN", "SinceStart", "Tracked", "Stat", "EMPTY_STAT", "INF"]

INF = math.inf
#: a window's aggregate: (sum, count, min, max, nonfinite, sum of squares, last finite value or None)
Stat = Tuple[float, int, float, float, int, float, Optional[float]]
EMPTY_STAT: Stat = (0.0, 0, INF, -INF, 0, 0.0, None)


@dataclass(frozen=True)
class WindowStat:
    """Aggregate of one window on one rank, or merged over ranks (``rlearn.distributed``).

    ``sum``/``count``/``sumsq``/``min``/``max``/``last`` are over the finite values (None, never 0, when
    ``count == 0``), ``nonfinite`` counts NaN/inf; ``values`` are the finite values, oldest first, when a
    registered statistic needs them.
    """

    sum: float
    count: int
    min: Optional[float]
    max: Optional[float]
    nonfinite: int = 0
    sumsq: float = 0.0
    last: Optional[float] = None
    values: Optional[Tuple[float, ...]] = None

    @classmethod
    def from_tuple(cls, stat: Sequence[Any]) -> "WindowStat":
        """From ``(sum, count, min, max, nonfinite, sumsq, last)`` with min/max +-inf when count is 0."""
        total, count, low, high, nonfinite, squares, last = stat
        if not count:
            return cls(0.0, 0, None, None, int(nonfinite), 0.0, None)
        return cls(float(total), int(count), float(low), float(high), int(nonfinite), float(squares), last)

    def with_values(self, values: Sequence[float]) -> "WindowStat":
        """This aggregate carrying ``values`` (the window's finite values) as well."""
        return replace(self, values=tuple(values))

    @property
    def avg(self) -> Optional[float]:
        """Mean of the finite values, or None when there are none (never 0)."""
        return self.sum / self.count if self.count else None

    @property
    def std(self) -> Optional[float]:
        """Population standard deviation (ddof=0), ``sqrt(sumsq/count - mean^2)``: mergeable across ranks,
        it loses digits when the spread is tiny next to the mean. None when there are no values."""
        if not self.count:
            return None
        mean = self.sum / self.count
        return math.sqrt(max(0.0, self.sumsq / self.count - mean * mean))

    def statistic(self, method: str) -> Optional[float]:
        """``mean`` / ``min`` / ``max`` / ``current`` / ``std`` (None when count is 0) or ``count`` (an int)."""
        if method == "count":
            return self.count
        if method not in ("mean", "min", "max", "current", "std"):
            raise ValueError(f"unknown statistic {method!r}; use mean, min, max, current, count or std")
        if not self.count:
            return None
        return {"mean": self.avg, "min": self.min, "max": self.max, "current": self.last, "std": self.std}[method]


def _suffix(values: List[Any], func: Any = None, neutral: Any = 0.0) -> List[Any]:
    """``out[i]`` = ``values[i]`` combined (``func``, default +) with every later value; ``out[-1]`` = neutral."""
    out = list(accumulate(reversed(values), func))
    out.reverse()
    out.append(neutral)
    return out


class KeyWindow:
    """The window of one key (module docstring); ``TickMonitor.update``/``avg`` inline its hot paths."""

    __slots__ = ("size", "end", "ticks", "vals", "bad", "o_n", "o_sum", "o_sum_n", "o_lo", "o_hi", "o_sq",
                 "c_ticks", "c_vals", "c_bad", "c_suf", "c_rest", "total_bad")

    def __init__(self, size: int, now: int) -> None:
        self.size = size
        self.total_bad = 0
        self.c_ticks: List[int] = []
        self.c_vals: List[float] = []
        self.c_bad: List[int] = []
        self.c_suf: Optional[List[float]] = None  # suffix sums of the closed block
        self.c_rest: Optional[Tuple[List[float], List[float], List[float]]] = None  # suffix min, max, squares
        self.ticks: List[int] = []
        self.vals: List[float] = []
        self.bad: List[int] = []
        self._open(now)

    def _open(self, now: int) -> None:
        self.end = now + self.size
        self.o_sum, self.o_sum_n = 0.0, 0  # running sum of the first o_sum_n open values
        self.o_n, self.o_lo, self.o_hi, self.o_sq = 0, INF, -INF, 0.0  # min, max, squares of the first o_n

    def roll(self, now: int) -> None:
        """Start a new open block at ``now`` (>= ``end``); the open block becomes the closed one."""
        old = (self.c_ticks, self.c_vals, self.c_bad)  # recycled for the new open block
        for part in old:
            part.clear()
        if now - self.size < self.end:  # some of the open block is in the window ending at now or now - 1
            self.c_ticks, self.c_vals, self.c_bad = self.ticks, self.vals, self.bad
            self.ticks, self.vals, self.bad = old
        else:  # everything has left the window
            for part in (self.ticks, self.vals, self.bad):
                part.clear()
        self.c_suf = self.c_rest = None
        self._open(now)

    def add(self, tick: int, value: float) -> None:
        """Record a float ``value`` at ``tick`` (ticks never decrease)."""
        if tick >= self.end:
            self.roll(tick)
        if value - value == 0.0:  # finite (NaN - NaN and inf - inf are NaN)
            self.ticks.append(tick)
            self.vals.append(value)
        else:
            self.bad.append(tick)
            self.total_bad += 1

    def _first_closed(self, end: int) -> int:
        """Index of the first closed value in the window ending at ``end`` (len if none)."""
        c_ticks, limit = self.c_ticks, end - self.size
        return len(c_ticks) if not c_ticks or c_ticks[-1] <= limit else bisect_right(c_ticks, limit)

    def _kept(self, end: int) -> int:
        """Number of open values recorded at ticks ``<= end``."""
        ticks = self.ticks
        return len(ticks) if not ticks or ticks[-1] <= end else bisect_right(ticks, end)

    def count(self, now: int) -> int:
        """Number of finite values in the window ending at ``now`` (the current tick)."""
        if now >= self.end:
            self.roll(now)
        return len(self.vals) + len(self.c_vals) - self._first_closed(now)

    def _suffix_sums(self) -> List[float]:
        self.c_suf = _suffix(self.c_vals)
        return self.c_suf

    def stat(self, now: int, end: int) -> Stat:
        """Every aggregate of the window ending at ``end`` (``now``, the current tick, or ``now - 1``)."""
        if now >= self.end:
            self.roll(now)
        vals, kept = self.vals, self._kept(end)
        if kept == len(vals):  # every open value is in: the running aggregates
            if self.o_sum_n != kept:
                self.o_sum += sum(vals[self.o_sum_n:])
                self.o_sum_n = kept
            if self.o_n != kept:
                new = vals[self.o_n:]
                self.o_lo, self.o_hi = min(self.o_lo, min(new)), max(self.o_hi, max(new))
                self.o_sq += sum([v * v for v in new])
                self.o_n = kept
            total, low, high, squares = self.o_sum, self.o_lo, self.o_hi, self.o_sq
        else:  # leave out the values recorded after ``end``
            head = vals[:kept]
            total, squares = sum(head), sum([v * v for v in head])
            low, high = (min(head), max(head)) if head else (INF, -INF)
        first = self._first_closed(end)
        if first < len(self.c_vals):
            if self.c_suf is None:
                self._suffix_sums()
            if self.c_rest is None:
                self.c_rest = (_suffix(self.c_vals, min, INF), _suffix(self.c_vals, max, -INF),
                               _suffix([v * v for v in self.c_vals]))
            suf_lo, suf_hi, suf_sq = self.c_rest
            total, low, high, squares = self.c_suf[first] + total, min(suf_lo[first], low), max(suf_hi[first], high), suf_sq[first] + squares  # type: ignore[index]
        count = kept + len(self.c_vals) - first
        last = vals[kept - 1] if kept else (self.c_vals[-1] if first < len(self.c_vals) else None)
        return total, count, low, high, self.nonfinite(now, end), squares, last

    def nonfinite(self, now: int, end: int) -> int:
        """Number of NaN/inf values in the window ending at ``end`` (``now``, the current tick, or ``now - 1``)."""
        if now >= self.end:
            self.roll(now)
        bad = self.bad
        count = len(bad) if not bad or bad[-1] <= end else bisect_right(bad, end)
        c_bad = self.c_bad
        if c_bad and c_bad[-1] > end - self.size:
            count += len(c_bad) - bisect_right(c_bad, end - self.size)
        return count

    def values(self, now: int, end: int) -> List[float]:
        """The finite values of the window ending at ``end`` (``now`` or ``now - 1``), oldest first."""
        if now >= self.end:
            self.roll(now)
        return self.c_vals[self._first_closed(end):] + self.vals[: self._kept(end)]

    def dump(self, now: int, first_tick: int) -> Tuple[List[List[Any]], List[int]]:
        """``([[tick, value], ...], [tick of each non-finite value, ...])`` from ``first_tick`` to ``now``."""
        if now >= self.end:
            self.roll(now)
        start = bisect_right(self.c_ticks, first_tick - 1)
        pairs = [[t, v] for t, v in zip(self.c_ticks[start:], self.c_vals[start:])]
        pairs += [[t, v] for t, v in zip(self.ticks, self.vals)]
        return pairs, self.c_bad[bisect_right(self.c_bad, first_tick - 1):] + self.bad

    @classmethod
    def load(cls, size: int, now: int, pairs: Sequence[Sequence[Any]], bad: Sequence[int]) -> "KeyWindow":
        """A window of ``size`` holding ``pairs`` (finite ``[tick, value]``, ticks increasing) and a NaN at
        every tick of ``bad``, all in ``[now - size, now]``."""
        items = sorted([*pairs, *((t, math.nan) for t in bad)], key=lambda item: item[0])  # stable: by tick
        window = cls(size, items[0][0] if items else now)
        for tick, value in items:
            window.add(tick, value)
        return window  # its total_bad: the loaded non-finite values


def merge_stats(a: Stat, b: Stat) -> Stat:
    """The aggregate of two disjoint groups of values; ``b`` holds the newer ones."""
    last = b[6] if b[6] is not None else a[6]
    return a[0] + b[0], a[1] + b[1], min(a[2], b[2]), max(a[3], b[3]), a[4] + b[4], a[5] + b[5], last


def _value_stat(value: float) -> Stat:
    if value - value == 0.0:
        return (value, 1, value, value, 0, value * value, value)
    return (0.0, 0, INF, -INF, 1, 0.0, None)


class LastN:
    """The last ``n`` values of a key (NaN/inf included, they count as values), in a HistoryBuffer ring."""

    def __init__(self, n: int, values: Optional[List[float]] = None, tick: int = -1, at_tick: int = 0) -> None:
        self.n = n
        self.buffer = HistoryBuffer(values or (), max_length=n)
        self.tick = tick  # tick of the newest value
        self.at_tick = at_tick  # how many of the newest values were recorded at ``tick``

    def add(self, tick: int, value: float) -> None:
        self.buffer.update(value)
        if tick == self.tick:
            self.at_tick += 1
        else:
            self.tick, self.at_tick = tick, 1

    def grow(self, n: int) -> "LastN":
        """A ring of ``n >= self.n`` values holding the same values (the older ones are gone for good)."""
        return LastN(n, self.buffer.data[0].tolist(), self.tick, self.at_tick)

    def stat(self, n: int, end: int) -> Stat:
        """Aggregate of the last ``n`` values minus those recorded after ``end``."""
        values = self._kept(n, end)
        finite = [v for v in values if v - v == 0.0]
        if not finite:
            return (0.0, 0, INF, -INF, len(values), 0.0, None)
        squares = math.fsum([v * v for v in finite])
        return math.fsum(finite), len(finite), min(finite), max(finite), len(values) - len(finite), squares, finite[-1]

    def _kept(self, n: int, end: int) -> List[float]:
        """The last ``n`` values (NaN/inf included) minus those recorded after ``end``, oldest first."""
        values = self.buffer.window(n)[0].tolist() if len(self.buffer) else []
        return values[: max(0, len(values) - self.at_tick)] if self.tick > end else values

    def values(self, n: int, end: int) -> List[float]:
        """The finite values among the last ``n`` recorded at ticks ``<= end``, oldest first."""
        return [v for v in self._kept(n, end) if v - v == 0.0]

    def state(self) -> Dict[str, Any]:
        return {"n": self.n, "values": self.buffer.data[0].tolist(), "tick": self.tick, "at_tick": self.at_tick}


class SinceStart:
    """Running aggregates of every value of a key since the run started, the current tick kept apart."""

    def __init__(self, before: Stat = EMPTY_STAT, tick: int = -1, current: Stat = EMPTY_STAT) -> None:
        self.before = before  # the values of the ticks before ``tick``
        self.tick = tick
        self.current = current  # the values of ``tick``

    def add(self, tick: int, value: float) -> None:
        if tick != self.tick:
            self.before = merge_stats(self.before, self.current)
            self.tick, self.current = tick, EMPTY_STAT
        self.current = merge_stats(self.current, _value_stat(value))

    def stat(self, end: int) -> Stat:
        """Aggregate of every value recorded at ticks ``<= end``."""
        return self.before if self.tick > end else merge_stats(self.before, self.current)

    def state(self) -> Dict[str, Any]:
        return {"before": list(self.before), "tick": self.tick, "current": list(self.current)}


class Tracked:
    """What one key keeps beyond its own window: other tick windows, a last-``n`` ring, since-start sums."""

    __slots__ = ("windows", "last_n", "since_start")

    def __init__(self) -> None:
        self.windows: Dict[int, KeyWindow] = {}
        self.last_n: Optional[LastN] = None
        self.since_start: Optional[SinceStart] = None

    def want(self, now: int, window: Optional[int] = None, last_n: Optional[int] = None,
             since_start: bool = False) -> None:
        """Also keep a ``window`` of that many ticks, the last ``last_n`` values, aggregates ``since_start``."""
        if window is not None and window not in self.windows:
            self.windows[window] = KeyWindow(window, now)
        if last_n is not None:
            if self.last_n is None:
                self.last_n = LastN(last_n)
            elif self.last_n.n < last_n:
                self.last_n = self.last_n.grow(last_n)
        if since_start and self.since_start is None:
            self.since_start = SinceStart()

    def add(self, tick: int, value: float) -> None:
        for window in self.windows.values():
            window.add(tick, value)
        if self.last_n is not None:
            self.last_n.add(tick, value)
        if self.since_start is not None:
            self.since_start.add(tick, value)
