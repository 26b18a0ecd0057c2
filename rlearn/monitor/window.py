"""The sliding window of one monitored key (:class:`KeyWindow`) and a window's mergeable aggregate
(:class:`WindowStat`).

One *tick* is one train iteration. A window of ``size`` ticks ending at tick ``end`` holds the values
recorded at ticks ``end - size + 1 .. end``.

Recording a value costs two list appends (its tick, its value); ticks without a value cost nothing. The
values live in two *blocks*:

* the *open* block starts at some tick ``start`` and takes every value recorded before ``start + size``
  (``self.end``); all its values are in the window of any tick ``< self.end``. Its sum, min, max and sum of
  squares are running aggregates, extended at query time with the values recorded since the last query;
* the *closed* block is the previous open block. When a value (or a query) arrives at ``self.end`` or
  later, the open block becomes the closed one (no copy) and the old closed block, whose ticks have all
  left every window by then, is dropped. The closed block's share of a window is read from *suffix*
  aggregates (of each element and every newer one, built once per block at the first query that needs
  them) at the index one binary search finds.

So recording is O(1), a query O(log size) plus the amortised O(1) per value of the one-off passes, and a key
keeps the values of at most ``2 * size`` ticks. Nothing is subtracted, so sums do not drift.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any, List, Optional, Sequence, Tuple

__all__ = ["KeyWindow", "WindowStat", "Stat", "EMPTY_STAT", "INF"]

INF = math.inf
#: a window's aggregate: (sum, count, min, max, nonfinite, sum of squares, last finite value or None)
Stat = Tuple[float, int, float, float, int, float, Optional[float]]
EMPTY_STAT: Stat = (0.0, 0, INF, -INF, 0, 0.0, None)


@dataclass(frozen=True)
class WindowStat:
    """Partial aggregate of one window on one rank (or merged over ranks: ``rlearn.distributed``).

    ``sum``/``count``/``sumsq``/``min``/``max`` are over the finite values (``min``/``max`` None when
    there are none), ``nonfinite`` counts NaN/inf, ``last`` is the most recent finite value (None when
    there is none). Every statistic of a window with ``count == 0`` is None (never 0), except ``count``.
    ``values``: the finite values themselves, oldest first, for a statistic registered with
    ``HistoryBuffer.register_statistics`` (None when no such statistic needs them).
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
        """Population standard deviation (ddof=0) of the finite values, or None when there are none.

        ``sqrt(sumsq/count - mean^2)`` (clipped at 0), mergeable across ranks; its absolute error is about
        ``eps * mean^2 / std``, so it loses digits when the spread is tiny next to the mean.
        """
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
    """The window of one key (see the module docstring). ``TickMonitor.update``/``avg`` inline the hot paths."""

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

    def sum_count(self, now: int) -> Tuple[float, int]:
        """Sum and number of the finite values in the window ending at ``now`` (the current tick)."""
        if now >= self.end:
            self.roll(now)
        count = len(self.vals)
        if self.o_sum_n != count:
            self.o_sum += sum(self.vals[self.o_sum_n:])
            self.o_sum_n = count
        total, first = self.o_sum, self._first_closed(now)
        if first < len(self.c_vals):
            total = (self.c_suf or self._suffix_sums())[first] + total
            count += len(self.c_vals) - first
        return total, count

    def _suffix_sums(self) -> List[float]:
        self.c_suf = _suffix(self.c_vals)
        return self.c_suf

    def stat(self, now: int, end: int) -> Stat:
        """Every aggregate of the window ending at ``end`` (``now`` or ``now - 1``; ``now`` = current tick).

        ``end = now - 1`` leaves out the values of the current tick: the open block's share is then
        summed directly (O(values in the open block), once, at the final log).
        """
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

    def nonfinite(self, now: int, end: Optional[int] = None) -> int:
        """Number of NaN/inf values in the window ending at ``end`` (default ``now``, the current tick)."""
        if now >= self.end:
            self.roll(now)
        end = now if end is None else end
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

    # ------------------------------------------------------------------------------------- state
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
