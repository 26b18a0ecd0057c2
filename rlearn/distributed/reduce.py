"""Cross-rank reduction of window statistics, by presence.

Each rank summarises a window of every key as a :class:`~rlearn.monitor.WindowStat` (sum, count, min, max,
number of non-finite values, sum of squares and the most recent finite value): a *partial aggregate* from which
every statistic (mean, min, max, current, count, std) follows, and which merges across ranks. Merging
adds sums and counts of the ranks that *have* values, so a key reported by 3 of 4 ranks is averaged over
those 3, weighted by their counts -- never diluted by zeros from the rank that did not report it. All
keys travel in one collective per log interval.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional

from rlearn.distributed.utils import all_gather_object
from rlearn.monitor.window import WindowStat

__all__ = ["WindowStat", "local_window_stats", "merge_window_stats", "reduce_window_stats"]


def local_window_stats(monitor: Any, keys: Iterable[str], end: Optional[int] = None) -> Dict[str, WindowStat]:
    """``monitor.window_stat(key, end)`` for ``keys`` (a TickMonitor or anything with the same API).

    Keys with neither finite nor non-finite values in the window are left out, which is what "presence"
    means for the merge.
    """
    stats: Dict[str, WindowStat] = {}
    for key in keys:
        stat = monitor.window_stat(key, end)
        if stat.count or stat.nonfinite:
            stats[key] = stat
    return stats


def merge_window_stats(per_rank: List[Mapping[str, WindowStat]]) -> Dict[str, WindowStat]:
    """Merge the summaries of several ranks (in rank order); the result keeps the first-seen key order.

    ``last`` is the value of the lowest rank that has one.
    """
    merged: Dict[str, WindowStat] = {}
    for stats in per_rank:
        for key, stat in stats.items():
            if not isinstance(stat, WindowStat):
                raise TypeError(f"window stats for {key!r} must be WindowStat, got {type(stat).__name__}")
            old = merged.get(key)
            if old is None:
                merged[key] = stat
                continue
            merged[key] = WindowStat(
                sum=old.sum + stat.sum,
                count=old.count + stat.count,
                min=_combine(min, old.min, stat.min),
                max=_combine(max, old.max, stat.max),
                nonfinite=old.nonfinite + stat.nonfinite,
                sumsq=old.sumsq + stat.sumsq,
                last=old.last if old.last is not None else stat.last,
                values=None if old.values is None and stat.values is None else (old.values or ()) + (stat.values or ()),
            )
    return merged


def reduce_window_stats(local: Mapping[str, WindowStat]) -> Dict[str, WindowStat]:
    """Merge ``local`` with every other rank's summary (one ``all_gather_object``; identity in one process)."""
    return merge_window_stats(all_gather_object(dict(local)))


def _combine(fn, a: Optional[float], b: Optional[float]) -> Optional[float]:
    values = [v for v in (a, b) if v is not None and math.isfinite(v)]
    return fn(values) if values else None
