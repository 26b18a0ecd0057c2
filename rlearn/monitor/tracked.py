"""What a key keeps beyond its own tick window, on request (see ``TickMonitor.keep``).

* :class:`LastN`: the last ``n`` values recorded, whenever they were recorded (a bounded
  :class:`~rlearn.logging.HistoryBuffer` ring), e.g. for "max over the last 100 episodes";
* :class:`SinceStart`: running aggregates of every value since the run started ('global' windows).

Both know the tick of their newest values, so a query ending at the previous tick (``end =
tick_count - 1``) leaves out the values of the current tick.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from rlearn.monitor.history_buffer import HistoryBuffer
from rlearn.monitor.window import EMPTY_STAT, INF, KeyWindow, Stat

__all__ = ["LastN", "SinceStart", "Tracked", "merge_stats"]


def merge_stats(a: Stat, b: Stat) -> Stat:
    """The aggregate of two disjoint groups of values; ``b`` holds the newer ones."""
    return (
        a[0] + b[0], a[1] + b[1], min(a[2], b[2]), max(a[3], b[3]), a[4] + b[4], a[5] + b[5],
        b[6] if b[6] is not None else a[6],
    )  # fmt: skip


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
        """Aggregate of the last ``n`` values recorded at ticks ``<= end``.

        When ``end`` is before the newest values' tick those are left out, and the result covers the
        ``n`` newest values minus them (the ring keeps no more than ``n``).
        """
        values = self._kept(n, end)
        finite = [v for v in values if v - v == 0.0]
        if not finite:
            return (0.0, 0, INF, -INF, len(values), 0.0, None)
        return (
            math.fsum(finite), len(finite), min(finite), max(finite), len(values) - len(finite),
            math.fsum([v * v for v in finite]), finite[-1],
        )  # fmt: skip

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

    def add(self, tick: int, value: float) -> None:
        for window in self.windows.values():
            window.add(tick, value)
        if self.last_n is not None:
            self.last_n.add(tick, value)
        if self.since_start is not None:
            self.since_start.add(tick, value)
