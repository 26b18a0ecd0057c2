"""What a monitored key keeps: its tick window (:class:`KeyWindow`), on request other windows, its last
``n`` values (:class:`LastN`) and aggregates since the start (:class:`SinceStart`), gathered in
:class:`Tracked`; and the one aggregate type, :class:`WindowStat`, which also merges ranks by presence.

A :class:`KeyWindow` holds an *open* block (values before ``end = start + size``, running aggregates) and
the previous, *closed* one, read from suffix aggregates: recording is two list appends, a query O(log size).
Every sum is a double-double (TwoSum), so a window mean is the correctly rounded mean of its values
(docs/monitoring.md).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Deque, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rlearn.monitor.history_buffer import SUFFIXES, dd_add, dd_div

__all__ = ["KeyWindow", "WindowStat", "LastN", "SinceStart", "Tracked", "EMPTY", "INF"]

INF = math.inf


@dataclass(slots=True)
class WindowStat:
    """Aggregate of one window on one rank, or merged over ranks (:meth:`merge`).

    ``sum`` (+ ``sum_lo``, its low part)/``count``/``sumsq``/``min``/``max``/``last`` are over the finite
    values (None, never 0, when ``count == 0``), ``nonfinite`` counts NaN/inf; ``values`` are the finite
    values, oldest first, when a registered statistic needs them.
    """

    sum: float
    count: int
    min: Optional[float]
    max: Optional[float]
    nonfinite: int = 0
    sumsq: float = 0.0
    last: Optional[float] = None
    values: Optional[Tuple[float, ...]] = None
    sum_lo: float = 0.0

    def with_values(self, values: Sequence[float]) -> "WindowStat":
        """This aggregate carrying ``values`` (the window's finite values) as well."""
        return replace(self, values=tuple(values))

    @property
    def avg(self) -> Optional[float]:
        """Correctly rounded mean of the finite values, or None when there are none (never 0)."""
        return dd_div(self.sum, self.sum_lo, self.count) if self.count else None

    @property
    def std(self) -> Optional[float]:
        """Population standard deviation (ddof=0), ``sqrt(sumsq/count - mean^2)``: mergeable across ranks,
        it loses digits when the spread is tiny next to the mean. None when there are no values."""
        if not self.count:
            return None
        mean = self.avg
        return math.sqrt(max(0.0, self.sumsq / self.count - mean * mean))  # type: ignore[operator]

    def statistic(self, method: str) -> Optional[float]:
        """``mean`` / ``min`` / ``max`` / ``current`` / ``std`` (None when count is 0) or ``count`` (an int)."""
        attribute = SUFFIXES.get(method)
        if attribute is None:
            raise ValueError(f"unknown statistic {method!r}; use mean, min, max, current, count or std")
        return getattr(self, attribute)

    def merge(self, newer: "WindowStat") -> "WindowStat":
        """The aggregate of two disjoint groups of values, ``newer`` holding the later (or higher-rank) ones."""
        if not self.count and not self.nonfinite:
            return newer
        hi, lo = dd_add(self.sum, self.sum_lo, newer.sum, newer.sum_lo)
        values = None if self.values is None and newer.values is None else (self.values or ()) + (newer.values or ())
        return WindowStat(hi, self.count + newer.count, _pick(min, self.min, newer.min), _pick(max, self.max, newer.max),
                          self.nonfinite + newer.nonfinite, self.sumsq + newer.sumsq,
                          self.last if newer.last is None else newer.last, values, lo)

    @staticmethod
    def merge_ranks(per_rank: Iterable[Mapping[str, "WindowStat"]]) -> Dict[str, "WindowStat"]:
        """Merge the summaries of several ranks (rank order) by presence: a key reported by 3 of 4 ranks is
        averaged over those 3; ``last`` is the lowest rank's that has one; keys in first-seen order."""
        merged: Dict[str, WindowStat] = {}
        for stats in per_rank:
            for key, stat in stats.items():
                if not isinstance(stat, WindowStat):
                    raise TypeError(f"window stats for {key!r} must be WindowStat, got {type(stat).__name__}")
                old = merged.get(key)
                merged[key] = stat if old is None else replace(old.merge(stat), last=old.last if old.last is not None else stat.last)
        return merged

    @classmethod
    def of(cls, values: Sequence[float], nonfinite: int = 0) -> "WindowStat":
        """The aggregate of finite ``values`` (oldest first) and ``nonfinite`` NaN/inf."""
        if not values:
            return cls(0.0, 0, None, None, nonfinite)
        hi, lo = _fold(values)
        return cls(hi, len(values), min(values), max(values), nonfinite, math.fsum([v * v for v in values]), values[-1], None, lo)

    def state(self) -> List[Any]:
        return [self.sum, self.count, self.min, self.max, self.nonfinite, self.sumsq, self.last, self.sum_lo]


EMPTY = WindowStat(0.0, 0, None, None)


def _pick(fn: Any, a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b if a is None else a if b is None else fn(a, b)


def _fold(values: Iterable[float], hi: float = 0.0, lo: float = 0.0) -> Tuple[float, float]:
    """``(hi, lo)`` + every value, a double-double (TwoSum; the low parts summed apart)."""
    for v in values:
        s = hi + v
        b = s - hi
        lo += (hi - (s - b)) + (v - b)
        hi = s
    return hi, lo


def _suffixes(vals: List[float]) -> List[Tuple[float, float, float, float, float]]:
    """``out[i]`` = (sum hi, sum lo, min, max, sum of squares) of ``vals[i:]``; ``out[-1]`` empty."""
    out = [(0.0, 0.0, INF, -INF, 0.0)] * (len(vals) + 1)
    hi = lo = sq = 0.0
    low, high = INF, -INF
    for i in range(len(vals) - 1, -1, -1):
        v = vals[i]
        s = hi + v
        b = s - hi
        lo += (hi - (s - b)) + (v - b)
        hi = s
        low, high, sq = min(low, v), max(high, v), sq + v * v
        out[i] = (hi, lo, low, high, sq)
    return out


class KeyWindow:
    """The window of one key (module docstring)."""

    __slots__ = ("size", "end", "ticks", "vals", "bad", "o_n", "o_hi", "o_lo", "o_min", "o_max", "o_sq",
                 "c_ticks", "c_vals", "c_bad", "c_suf", "total_bad")

    def __init__(self, size: int, now: int) -> None:
        self.size = size
        self.total_bad = 0
        self.c_ticks: List[int] = []
        self.c_vals: List[float] = []
        self.c_bad: List[int] = []
        self.c_suf: Optional[List[Tuple[float, float, float, float, float]]] = None
        self.ticks: List[int] = []
        self.vals: List[float] = []
        self.bad: List[int] = []
        self._open(now)

    def _open(self, now: int) -> None:
        self.end = now + self.size
        self.o_n, self.o_hi, self.o_lo, self.o_min, self.o_max, self.o_sq = 0, 0.0, 0.0, INF, -INF, 0.0

    def roll(self, now: int) -> None:
        """Start a new open block at ``now`` (>= ``end``); the open block becomes the closed one."""
        if now - self.size < self.end:  # some of the open block is in the window ending at now or now - 1
            self.c_ticks, self.c_vals, self.c_bad = self.ticks, self.vals, self.bad
        else:
            self.c_ticks, self.c_vals, self.c_bad = [], [], []
        self.ticks, self.vals, self.bad = [], [], []
        self.c_suf = None
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

    def stat(self, now: int, end: int) -> WindowStat:
        """The aggregate of the window ending at ``end`` (``now``, the current tick, or ``now - 1``); every log
        asks it of every key, so it is one function."""
        if now >= self.end:
            self.roll(now)
        vals, ticks = self.vals, self.ticks
        kept = len(ticks) if not ticks or ticks[-1] <= end else bisect_right(ticks, end)
        running = kept == len(vals)  # every open value is in: bring the running aggregates up to date
        if running:
            start, hi, lo, low, high, sq = self.o_n, self.o_hi, self.o_lo, self.o_min, self.o_max, self.o_sq
        else:  # leave out the values recorded after ``end``
            start, hi, lo, low, high, sq = 0, 0.0, 0.0, INF, -INF, 0.0
        for i in range(start, kept):
            v = vals[i]
            s = hi + v
            b = s - hi
            lo += (hi - (s - b)) + (v - b)  # TwoSum: the rounding error of hi + v, exactly
            hi = s
            low = v if v < low else low
            high = v if v > high else high
            sq += v * v
        if running:
            self.o_n, self.o_hi, self.o_lo, self.o_min, self.o_max, self.o_sq = kept, hi, lo, low, high, sq
        c_ticks, limit = self.c_ticks, end - self.size
        first = len(c_ticks) if not c_ticks or c_ticks[-1] <= limit else bisect_right(c_ticks, limit)
        if first < len(c_ticks):
            if self.c_suf is None:
                self.c_suf = _suffixes(self.c_vals)
            c_hi, c_lo, c_low, c_high, c_sq = self.c_suf[first]
            s = c_hi + hi
            b = s - c_hi
            lo += c_lo + ((c_hi - (s - b)) + (hi - b))
            hi = s
            low, high, sq = c_low if c_low < low else low, c_high if c_high > high else high, c_sq + sq
        bad, c_bad = self.bad, self.c_bad
        nonfinite = len(bad) if not bad or bad[-1] <= end else bisect_right(bad, end)
        if c_bad and c_bad[-1] > limit:
            nonfinite += len(c_bad) - bisect_right(c_bad, limit)
        count = kept + len(c_ticks) - first
        if not count:
            return WindowStat(0.0, 0, None, None, nonfinite)
        last = vals[kept - 1] if kept else self.c_vals[-1]
        return WindowStat(hi, count, low, high, nonfinite, sq, last, None, lo)

    def values(self, now: int, end: int) -> List[float]:
        """The finite values of the window ending at ``end`` (``now`` or ``now - 1``), oldest first."""
        if now >= self.end:
            self.roll(now)
        return ([v for t, v in zip(self.c_ticks, self.c_vals) if t > end - self.size]
                + [v for t, v in zip(self.ticks, self.vals) if t <= end])

    def dump(self, now: int, first_tick: int) -> Tuple[List[List[Any]], List[int]]:
        """``([[tick, value], ...], [tick of each non-finite value, ...])`` from ``first_tick`` to ``now``."""
        if now >= self.end:
            self.roll(now)
        pairs = [[t, v] for t, v in zip(self.c_ticks + self.ticks, self.c_vals + self.vals) if t >= first_tick]
        return pairs, [t for t in self.c_bad + self.bad if t >= first_tick]

    @classmethod
    def load(cls, size: int, now: int, pairs: Sequence[Sequence[Any]], bad: Sequence[int]) -> "KeyWindow":
        """A window of ``size`` holding ``pairs`` (finite ``[tick, value]``, ticks increasing) and a NaN at
        every tick of ``bad``, all in ``[now - size, now]``."""
        items = sorted([*pairs, *((t, math.nan) for t in bad)], key=lambda item: item[0])  # stable: by tick
        window = cls(size, items[0][0] if items else now)
        for tick, value in items:
            window.add(tick, value)
        return window  # its total_bad: the loaded non-finite values


class LastN:
    """The last ``n`` values of a key (NaN/inf included, they count as values), oldest first."""

    def __init__(self, n: int, values: Iterable[float] = (), tick: int = -1, at_tick: int = 0) -> None:
        self.n = n
        self.ring: Deque[float] = deque(values, maxlen=n)
        self.tick = tick  # tick of the newest value
        self.at_tick = at_tick  # how many of the newest values were recorded at ``tick``

    def add(self, tick: int, value: float) -> None:
        self.ring.append(value)
        self.tick, self.at_tick = tick, self.at_tick + 1 if tick == self.tick else 1

    def grow(self, n: int) -> "LastN":
        """A ring of ``n >= self.n`` values holding the same values (the older ones are gone for good)."""
        return LastN(n, self.ring, self.tick, self.at_tick)

    def stat(self, n: int, end: int) -> WindowStat:
        """Aggregate of the last ``n`` values minus those recorded after ``end``."""
        values = self._kept(n, end)
        finite = [v for v in values if v - v == 0.0]
        return WindowStat.of(finite, len(values) - len(finite))

    def _kept(self, n: int, end: int) -> List[float]:
        values = list(self.ring)[-n:]
        return values[: max(0, len(values) - self.at_tick)] if self.tick > end else values

    def values(self, n: int, end: int) -> List[float]:
        """The finite values among the last ``n`` recorded at ticks ``<= end``, oldest first."""
        return [v for v in self._kept(n, end) if v - v == 0.0]

    def state(self) -> Dict[str, Any]:
        return {"n": self.n, "values": list(self.ring), "tick": self.tick, "at_tick": self.at_tick}


class SinceStart:
    """Running aggregates of every value of a key since the run started, the current tick kept apart."""

    def __init__(self, before: WindowStat = EMPTY, tick: int = -1, current: WindowStat = EMPTY) -> None:
        self.before, self.tick, self.current = before, tick, current

    def add(self, tick: int, value: float) -> None:
        if tick != self.tick:
            self.before, self.tick, self.current = self.before.merge(self.current), tick, EMPTY
        self.current = self.current.merge(WindowStat.of([value]) if value - value == 0.0 else WindowStat.of([], 1))

    def stat(self, end: int) -> WindowStat:
        """Aggregate of every value recorded at ticks ``<= end``."""
        return self.before if self.tick > end else self.before.merge(self.current)

    def state(self) -> Dict[str, Any]:
        return {"before": self.before.state(), "tick": self.tick, "current": self.current.state()}


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
            if self.last_n is None or self.last_n.n < last_n:
                self.last_n = LastN(last_n) if self.last_n is None else self.last_n.grow(last_n)
        if since_start and self.since_start is None:
            self.since_start = SinceStart()

    def add(self, tick: int, value: float) -> None:
        for window in self.windows.values():
            window.add(tick, value)
        if self.last_n is not None:
            self.last_n.add(tick, value)
        if self.since_start is not None:
            self.since_start.add(tick, value)
