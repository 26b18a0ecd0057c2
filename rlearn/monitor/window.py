"""The sliding window of one monitored key: O(1) amortised recording, cheap queries.

One *tick* is one train iteration. A window of ``size`` ticks ending at tick ``end`` holds the values
recorded at ticks ``end - size + 1 .. end``.

Data structure
--------------
Recording a value costs two list appends (its tick, its value); ticks without a value cost nothing.
The values live in two *blocks* of ticks:

* the *open* block starts at some tick ``start`` and takes every value recorded before ``start + size``
  (``self.end``); all its values are in the window of any tick ``< self.end``;
* the *closed* block is the previous open block. When a value (or a query) arrives at ``self.end`` or
  later, the open block becomes the closed one (two reassignments, no copy) and the old closed block,
  whose ticks have all left the window by then, is dropped. Expiry is lazy, by tick index.

A query takes the open block's share from running aggregates extended with the values recorded since
the previous query, and the closed block's share from *suffix* aggregates (sum, count, sum of squares,
min, max of each element and every newer one, built once per block at the first query that needs
them) indexed by one binary search. So a query costs O(log size) plus the amortised O(1) per value of
those one-off passes. Nothing is subtracted, so sums do not drift; min/max are exact.

After a restore (or a window-size change) the closed block holds one aggregate per tick
(``c_counts``/``c_sqs``/``c_lasts`` are set); after a roll it holds the raw values (they are ``None``).
A key keeps at most two blocks, i.e. the values of at most ``2 * size`` ticks.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from itertools import accumulate
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["KeyWindow", "Entry", "Stat", "EMPTY_STAT"]

INF = math.inf

#: one tick's aggregate: (tick, sum, count, min, max, nonfinite, sum of squares, last finite value);
#: min/max are +inf/-inf and last is 0.0 when count == 0
Entry = Tuple[int, float, int, float, float, int, float, float]
#: a window's aggregate: (sum, count, min, max, nonfinite, sum of squares, last finite value or None)
Stat = Tuple[float, int, float, float, int, float, Optional[float]]
EMPTY_STAT: Stat = (0.0, 0, INF, -INF, 0, 0.0, None)


def _suffix(values: List[Any], func: Any, neutral: Any) -> List[Any]:
    """``out[i]`` = ``values[i]`` combined (``func``, default +) with every later value; ``out[-1]`` = neutral."""
    out = list(accumulate(reversed(values), func))
    out.reverse()
    out.append(neutral)
    return out


class KeyWindow:
    """The window of one key (see the module docstring). ``TickMonitor.update``/``avg`` inline the hot paths."""

    __slots__ = (
        "size", "end", "ticks", "vals", "bad", "o_sum", "o_sum_n", "o_lo", "o_hi", "o_mm_n", "o_sq", "o_sq_n",
        "c_ticks", "c_sums", "c_counts", "c_los", "c_his", "c_sqs", "c_lasts", "c_bad",
        "c_suf", "c_suf_n", "c_suf_lo", "c_suf_hi", "c_suf_sq", "total_bad",
    )  # fmt: skip

    def __init__(self, size: int, now: int) -> None:
        self.size = size
        self.total_bad = 0
        self._set_closed([], [], None, [], [], None, None, [])
        self._open_block(now)

    def _open_block(self, now: int) -> None:
        self.end = now + self.size
        self.ticks: List[int] = []
        self.vals: List[float] = []
        self.bad: List[int] = []
        self._reset_running()

    def _reset_running(self) -> None:
        self.o_sum, self.o_sum_n = 0.0, 0
        self.o_lo, self.o_hi, self.o_mm_n = INF, -INF, 0
        self.o_sq, self.o_sq_n = 0.0, 0

    def _set_closed(self, ticks, sums, counts, los, his, sqs, lasts, bad) -> None:  # type: ignore[no-untyped-def]
        self.c_ticks, self.c_sums, self.c_counts, self.c_los, self.c_his = ticks, sums, counts, los, his
        self.c_sqs, self.c_lasts, self.c_bad = sqs, lasts, bad
        self.c_suf = self.c_suf_n = self.c_suf_lo = self.c_suf_hi = self.c_suf_sq = None

    # ------------------------------------------------------------------------------------- writes
    def roll(self, now: int) -> None:
        """Start a new open block at ``now`` (>= ``end``); the open block becomes the closed one."""
        if self.c_counts is not None and self._closed_needed(now):
            # a restored closed block (it may end at the tick it was restored at) still holds ticks of the
            # window ending at now - 1: merge both blocks into a new restored one (once per restore)
            self.load_entries(self._collect(now - self.size), now)
            return
        ticks, vals, bad = self.c_ticks, self.c_sums, self.c_bad  # recycled for the new open block
        ticks.clear()
        vals.clear()
        bad.clear()
        if now - self.size < self.end:  # some of the open block is in the window ending at now or now - 1
            self._set_closed(self.ticks, self.vals, None, self.vals, self.vals, None, None, self.bad)
            self.ticks, self.vals, self.bad = ticks, vals, bad
        else:  # everything has left the window: the closed block is empty
            self.ticks.clear()
            self.vals.clear()
            self.bad.clear()
            self._set_closed(ticks, vals, None, vals, vals, None, None, bad)
        self.end = now + self.size
        self._reset_running()

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

    def _closed_needed(self, now: int) -> bool:
        limit = now - self.size
        return bool(self.c_ticks and self.c_ticks[-1] >= limit or self.c_bad and self.c_bad[-1] >= limit)

    # -------------------------------------------------------------------------------------- reads
    def _closed_first(self, limit: int) -> int:
        """Index of the first closed element with a tick after ``limit`` (len if none)."""
        c_ticks = self.c_ticks
        if not c_ticks or c_ticks[-1] <= limit:
            return len(c_ticks)
        return bisect_right(c_ticks, limit)

    def sum_count(self, now: int) -> Tuple[float, int]:
        """Sum and number of the finite values in the window ending at ``now`` (the current tick)."""
        if now >= self.end:
            self.roll(now)
        vals = self.vals
        count = len(vals)
        if self.o_sum_n != count:
            self.o_sum += sum(vals[self.o_sum_n :])
            self.o_sum_n = count
        total = self.o_sum
        first = self._closed_first(now - self.size)
        if first < len(self.c_ticks):
            if self.c_suf is None:
                self._suffix_sums()
            total = self.c_suf[first] + total  # type: ignore[index]
            count += len(self.c_ticks) - first if self.c_counts is None else self.c_suf_n[first]  # type: ignore[index]
        return total, count

    def min_max(self, now: int) -> Tuple[float, float]:
        """Min and max of the finite values in the window ending at ``now`` (inf, -inf if none)."""
        if now >= self.end:
            self.roll(now)
        vals = self.vals
        if self.o_mm_n != len(vals):
            new = vals[self.o_mm_n :]
            self.o_lo = min(self.o_lo, min(new))
            self.o_hi = max(self.o_hi, max(new))
            self.o_mm_n = len(vals)
        low, high = self.o_lo, self.o_hi
        first = self._closed_first(now - self.size)
        if first < len(self.c_ticks):
            if self.c_suf_lo is None:
                self.c_suf_lo = _suffix(self.c_los, min, INF)
                self.c_suf_hi = _suffix(self.c_his, max, -INF)
            low = min(low, self.c_suf_lo[first])
            high = max(high, self.c_suf_hi[first])  # type: ignore[index]
        return low, high

    def nonfinite(self, now: int, end: Optional[int] = None) -> int:
        """Number of NaN/inf values in the window ending at ``end`` (default ``now``, the current tick)."""
        if now >= self.end:
            self.roll(now)
        end = now if end is None else end
        bad = self.bad
        count = len(bad) if not bad or bad[-1] <= end else bisect_right(bad, end)
        c_bad = self.c_bad
        if c_bad and c_bad[-1] > end - self.size:
            upper = len(c_bad) if c_bad[-1] <= end else bisect_right(c_bad, end)
            count += upper - bisect_right(c_bad, end - self.size)
        return count

    def stat(self, now: int, end: int) -> Stat:
        """Every aggregate of the window ending at ``end`` (``now`` or ``now - 1``; ``now`` = current tick).

        ``end = now - 1`` leaves out the values of the current tick: the open block's share is then
        summed directly (O(values in the open block)); the closed block lies before ``now`` anyway.
        """
        if now >= self.end:
            self.roll(now)
        ticks, vals = self.ticks, self.vals
        if not ticks or ticks[-1] <= end:  # every open value is in: the running aggregates
            kept = len(vals)
            if self.o_sum_n != kept:
                self.o_sum += sum(vals[self.o_sum_n :])
                self.o_sum_n = kept
            if self.o_mm_n != kept:
                new = vals[self.o_mm_n :]
                self.o_lo, self.o_hi = min(self.o_lo, min(new)), max(self.o_hi, max(new))
                self.o_mm_n = kept
            if self.o_sq_n != kept:
                self.o_sq += sum([v * v for v in vals[self.o_sq_n :]])
                self.o_sq_n = kept
            total, squares, low, high = self.o_sum, self.o_sq, self.o_lo, self.o_hi
        else:  # leave out the values recorded after ``end``
            kept = bisect_right(ticks, end)
            head = vals[:kept]
            total, squares = sum(head), sum([v * v for v in head])
            low, high = (min(head), max(head)) if head else (INF, -INF)
        first = self._closed_first(end - self.size)
        c_ticks = self.c_ticks
        stop = len(c_ticks) if not c_ticks or c_ticks[-1] <= end else bisect_right(c_ticks, end)
        if stop == len(c_ticks):
            c_sum, c_count, c_lo, c_hi, c_sq = self._closed_share(first)
        else:  # restored at the current tick: its aggregate is in the closed block, after ``end``
            c_sum, c_count, c_lo, c_hi, c_sq = self._closed_range(first, stop)
        if kept:
            last: Optional[float] = vals[kept - 1]
        elif c_count:
            last = self.c_sums[stop - 1] if self.c_lasts is None else self.c_lasts[stop - 1]
        else:
            last = None
        return (
            c_sum + total, c_count + kept, min(c_lo, low), max(c_hi, high),
            self.nonfinite(now, end), c_sq + squares, last,
        )  # fmt: skip

    def values(self, now: int, end: int) -> List[float]:
        """The finite values of the window ending at ``end`` (``now`` or ``now - 1``), oldest first.

        A tick restored from an aggregate of several values gives values with its sum, count, min and max
        (its min, its max and the rest at their mean)."""
        if now >= self.end:
            self.roll(now)
        first = self._closed_first(end - self.size)
        stop = bisect_right(self.c_ticks, end)
        if self.c_counts is None:
            out = self.c_sums[first:stop]
        else:
            out = []
            for i in range(first, stop):
                count, low, high = self.c_counts[i], self.c_los[i], self.c_his[i]
                if count == 1:
                    out.append(self.c_sums[i])
                elif count:
                    out += [low] + [(self.c_sums[i] - low - high) / (count - 2)] * (count - 2) + [high]
        return out + self.vals[: bisect_right(self.ticks, end)]

    def _closed_share(self, first: int) -> Tuple[float, int, float, float, float]:
        """Sum, count, min, max and sum of squares of the closed elements from index ``first`` on."""
        if first >= len(self.c_ticks):
            return 0.0, 0, INF, -INF, 0.0
        if self.c_suf is None:
            self._suffix_sums()
        if self.c_suf_lo is None:
            self.c_suf_lo = _suffix(self.c_los, min, INF)
            self.c_suf_hi = _suffix(self.c_his, max, -INF)
        if self.c_suf_sq is None:
            squares = self.c_sqs if self.c_sqs is not None else [v * v for v in self.c_sums]
            self.c_suf_sq = _suffix(squares, None, 0.0)
        count = len(self.c_ticks) - first if self.c_counts is None else self.c_suf_n[first]  # type: ignore[index]
        return (
            self.c_suf[first], count, self.c_suf_lo[first], self.c_suf_hi[first], self.c_suf_sq[first],  # type: ignore[index]
        )

    def _closed_range(self, first: int, stop: int) -> Tuple[float, int, float, float, float]:
        """Sum, count, min, max and sum of squares of the closed elements ``first .. stop - 1``, directly."""
        if first >= stop:
            return 0.0, 0, INF, -INF, 0.0
        sums = self.c_sums[first:stop]
        if self.c_counts is None:
            return sum(sums), len(sums), min(sums), max(sums), sum([v * v for v in sums])
        return (
            sum(sums), sum(self.c_counts[first:stop]), min(self.c_los[first:stop]), max(self.c_his[first:stop]),
            sum(self.c_sqs[first:stop]),  # type: ignore[index]
        )

    def _suffix_sums(self) -> List[float]:
        self.c_suf = suffix = _suffix(self.c_sums, None, 0.0)
        if self.c_counts is not None:
            self.c_suf_n = _suffix(self.c_counts, None, 0)
        return suffix

    # ------------------------------------------------------------------------------------- state
    def entries(self, now: int, first_tick: int) -> List[Entry]:
        """One aggregate per tick from ``first_tick`` to ``now``, oldest first (the state dict format)."""
        if now >= self.end:
            self.roll(now)
        return self._collect(first_tick)

    def _collect(self, first_tick: int) -> List[Entry]:
        merged: Dict[int, List[Any]] = {}

        def merge(tick: int, total: float, count: int, low: float, high: float, bad: int, sq: float, last: float) -> None:
            entry = merged.get(tick)
            if entry is None:
                merged[tick] = [tick, total, count, low, high, bad, sq, last]
                return
            entry[1] += total  # in recording order, like the running sum of a tick
            entry[2] += count
            entry[3] = min(entry[3], low)
            entry[4] = max(entry[4], high)
            entry[5] += bad
            entry[6] += sq
            if count:
                entry[7] = last

        c_ticks, c_counts, c_sqs, c_lasts = self.c_ticks, self.c_counts, self.c_sqs, self.c_lasts
        for i in range(bisect_right(c_ticks, first_tick - 1), len(c_ticks)):
            value = self.c_sums[i]
            if c_counts is None:
                merge(c_ticks[i], value, 1, value, value, 0, value * value, value)
            else:
                merge(c_ticks[i], value, c_counts[i], self.c_los[i], self.c_his[i], 0, c_sqs[i], c_lasts[i])  # type: ignore[index]
        for tick in self.c_bad[bisect_right(self.c_bad, first_tick - 1) :]:
            merge(tick, 0.0, 0, INF, -INF, 1, 0.0, 0.0)
        for tick, value in zip(self.ticks, self.vals):
            merge(tick, value, 1, value, value, 0, value * value, value)
        for tick in self.bad:
            merge(tick, 0.0, 0, INF, -INF, 1, 0.0, 0.0)
        return [tuple(merged[tick]) for tick in sorted(merged)]  # type: ignore[misc]

    def load_entries(self, entries: List[Entry], now: int) -> None:
        """Replace the window by ``entries`` (validated, oldest first, none after ``now``)."""
        ticks: List[int] = []
        sums: List[float] = []
        counts: List[int] = []
        los: List[float] = []
        his: List[float] = []
        sqs: List[float] = []
        lasts: List[float] = []
        bad: List[int] = []
        for tick, total, count, low, high, nonfinite, sq, last in entries:
            if count:
                ticks.append(tick)
                sums.append(total)
                counts.append(count)
                los.append(low)
                his.append(high)
                sqs.append(sq)
                lasts.append(last)
            bad.extend([tick] * nonfinite)
        self._set_closed(ticks, sums, counts, los, his, sqs, lasts, bad)
        self._open_block(now)
