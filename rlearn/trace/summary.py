"""Profiler-style summary of a merged trace: one row per phase name (calls, mean, total, % of wall time, where
nested phases are each counted in full), sorted by total time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import List, Sequence

from tabulate import tabulate

from rlearn.trace.merge import Interval, rank_bounds


@dataclass(frozen=True)
class PhaseStats:
    """Aggregate of one phase name."""

    name: str
    calls: int
    total_ns: int
    wall_ns: int

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.calls

    @property
    def percent_of_wall(self) -> float:
        return 100.0 * self.total_ns / self.wall_ns if self.wall_ns else 0.0


def wall_time_ns(intervals: Sequence[Interval]) -> int:
    """Sum over ranks of (last span end - first span start)."""
    return sum(high - low for low, high in rank_bounds(intervals).values())


def summarize(intervals: Sequence[Interval]) -> List[PhaseStats]:
    """One :class:`PhaseStats` per phase name, largest total first (ties by name)."""
    wall = wall_time_ns(intervals)
    calls = Counter(interval.name for interval in intervals)
    totals: Counter = Counter()
    for interval in intervals:
        totals[interval.name] += interval.duration
    return sorted((PhaseStats(name, calls[name], totals[name], wall) for name in calls),
                  key=lambda row: (-row.total_ns, row.name))


def format_summary(rows: Sequence[PhaseStats], tablefmt: str = "simple") -> str:
    """The summary as a text table (times in milliseconds)."""
    if not rows:
        return "(no spans recorded)"
    table = [[row.name, row.calls, row.mean_ns / 1e6, row.total_ns / 1e6, row.percent_of_wall] for row in rows]
    return tabulate(table, headers=["phase", "calls", "mean (ms)", "total (ms)", "% wall"], tablefmt=tablefmt,
                    floatfmt=("", "", ".3f", ".3f", ".1f"))
