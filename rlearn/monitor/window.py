"""What a monitored key keeps: its tick window (:class:`KeyWindow`, also any other window ``keep`` asks for),
its last ``n`` values (:class:`LastN`) and aggregates since the start (:class:`SinceStart`); and the one
aggregate type, :class:`WindowStat`, which also merges ranks by presence.

A window is the key's ``(tick, value)`` pairs, the old ones dropped once per ``size`` ticks: recording is two
list appends; a statistic scans the window's values (O(window), once per log). Sums are double-doubles
(``dd_sum``), so a window mean is the correctly rounded mean of its values (docs/monitoring.md).
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Deque, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from rlearn.monitor.history_buffer import SUFFIXES, dd_add, dd_div, dd_sum

__all__ = ["KeyWindow", "WindowStat", "LastN", "SinceStart", "EMPTY"]


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
        return WindowStat(hi, self.count + newer.count, _pick(min, self.min, newer.min),
                          _pick(max, self.max, newer.max), self.nonfinite + newer.nonfinite, self.sumsq + newer.sumsq,
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
                last = stat.last if old is None or old.last is None else old.last
                merged[key] = stat if old is None else replace(old.merge(stat), last=last)
        return merged

    @classmethod
    def of(cls, values: Sequence[float], nonfinite: int = 0) -> "WindowStat":
        """The aggregate of finite ``values`` (oldest first) and ``nonfinite`` NaN/inf."""
        if not values:
            return cls(0.0, 0, None, None, nonfinite)
        try:  # dd_sum, inlined: every log makes one of these per key
            hi = math.fsum(values)
            lo = math.fsum([*values, -hi])
        except OverflowError:
            hi, lo = dd_sum(values)
        if len(values) < 256:  # below a few hundred values numpy's call overhead outweighs its speed
            low, high, squares = min(values), max(values), sum(map(operator.mul, values, values))
        else:
            array = np.fromiter(values, np.float64, len(values))
            low, high, squares = float(array.min()), float(array.max()), float(array @ array)
        return cls(hi, len(values), low, high, nonfinite, squares, values[-1], None, lo)

    def state(self) -> List[Any]:
        """``[sum, count, min, max, nonfinite, sumsq, last, sum_lo]`` (the state format of ``SinceStart``)."""
        return [self.sum, self.count, self.min, self.max, self.nonfinite, self.sumsq, self.last, self.sum_lo]


EMPTY = WindowStat(0.0, 0, None, None)


def _pick(fn: Any, a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b if a is None else a if b is None else fn(a, b)


def _finite(values: List[float]) -> List[float]:
    return [v for v in values if v - v == 0.0]  # NaN - NaN and inf - inf are NaN


class _Scan:
    """A store whose statistics scan the values of a window."""

    __slots__ = ()

    def _span(self, end: int, n: Optional[int]) -> Tuple[List[float], List[float]]:
        """``(values, finite values)``, oldest first, of the window ending at ``end`` (last ``n`` of a LastN)."""
        raise NotImplementedError

    def stat(self, end: int, n: Optional[int] = None) -> WindowStat:
        """The aggregate of the window ending at ``end`` (of a :class:`LastN`: its last ``n`` values)."""
        values, finite = self._span(end, n)
        return WindowStat.of(finite, len(values) - len(finite))

    def values(self, end: int, n: Optional[int] = None) -> List[float]:
        """The finite values of that window, oldest first."""
        return self._span(end, n)[1]


class KeyWindow(_Scan):
    """The ``(tick, value)`` pairs (NaN/inf included) of one key's last ``size`` ticks and a few older ones,
    ticks ascending; ``end`` of a query is the current tick or the one before."""

    __slots__ = ("size", "ticks", "vals", "trim_at", "bad_tick", "total_bad")

    def __init__(self, size: int) -> None:
        self.size = size
        self.ticks: List[int] = []
        self.vals: List[float] = []
        self.trim_at = 0  # the tick of the next trim
        self.bad_tick = -1  # the tick of the newest NaN/inf (a window starting later holds none)
        self.total_bad = 0  # NaN/inf ever recorded

    def add(self, tick: int, value: float) -> None:
        """Record a float ``value`` at ``tick`` (ticks never decrease)."""
        if tick >= self.trim_at:  # once per ``size`` ticks: memory stays bounded by ``2 * size + 1`` ticks
            self.trim(tick - self.size)
            self.trim_at = tick + self.size
        self.ticks.append(tick)
        self.vals.append(value)
        if value - value != 0.0:
            self.bad_tick = tick
            self.total_bad += 1

    def trim(self, first: int) -> None:
        """Forget the values recorded before tick ``first``."""
        cut = bisect_left(self.ticks, first)
        del self.ticks[:cut], self.vals[:cut]

    def resize(self, size: int, now: int) -> None:
        """A window of ``size`` ticks from tick ``now`` on; values that had left the old one stay out."""
        self.trim(max(now - self.size + 1, now - size))
        self.size, self.trim_at = size, now + size

    def _span(self, end: int, n: Optional[int] = None) -> Tuple[List[float], List[float]]:
        ticks, first = self.ticks, end - self.size + 1
        last = len(ticks) if not ticks or ticks[-1] <= end else bisect_right(ticks, end)
        values = self.vals[bisect_left(ticks, first): last]
        return values, values if self.bad_tick < first else _finite(values)

    def stat(self, end: int, n: Optional[int] = None) -> WindowStat:
        """The aggregate of the window ending at ``end`` (``_span`` inlined: every log asks it of every key)."""
        ticks, first = self.ticks, end - self.size + 1
        last = len(ticks) if not ticks or ticks[-1] <= end else bisect_right(ticks, end)
        values = self.vals[bisect_left(ticks, first): last]
        if self.bad_tick < first:
            return WindowStat.of(values)
        finite = _finite(values)
        return WindowStat.of(finite, len(values) - len(finite))

    def state(self, now: int) -> Dict[str, List[Any]]:
        """``{"values": [[tick, value], ...], "nonfinite": [tick of each NaN/inf, ...]}`` of the window at tick
        ``now`` and the tick before it."""
        cut = bisect_left(self.ticks, now - self.size)
        pairs = list(zip(self.ticks[cut:], self.vals[cut:]))
        return {"values": [[t, v] for t, v in pairs if v - v == 0.0],
                "nonfinite": [t for t, v in pairs if v - v != 0.0]}


class LastN(_Scan):
    """The last ``n`` values of a key with their ticks (NaN/inf included: they count as values), oldest first."""

    def __init__(self, n: int, pairs: Iterable[Tuple[int, float]] = ()) -> None:
        self.n = n
        self.ring: Deque[Tuple[int, float]] = deque(pairs, maxlen=n)

    def add(self, tick: int, value: float) -> None:
        self.ring.append((tick, value))

    def _span(self, end: int, n: Optional[int]) -> Tuple[List[float], List[float]]:
        values = [v for t, v in list(self.ring)[-(n or self.n):] if t <= end]
        return values, _finite(values)

    def state(self, now: int) -> Dict[str, Any]:
        return {"n": self.n, "values": [list(pair) for pair in self.ring]}


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

    def state(self, now: int) -> Dict[str, Any]:
        return {"before": self.before.state(), "tick": self.tick, "current": self.current.state()}
