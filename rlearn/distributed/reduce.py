"""Cross-rank reduction of window statistics, by presence.

Each rank's :class:`~rlearn.monitor.WindowStat` per key is a partial aggregate (sum, count, min, max, ...);
merging adds those of the ranks that *have* values, so a key reported by 3 of 4 ranks is averaged over those 3,
never diluted by zeros. All keys travel in one collective per log interval.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional

from rlearn.distributed.utils import all_gather_object
from rlearn.monitor.window import WindowStat

__all__ = ["WindowStat", "merge_window_stats", "reduce_window_stats"]


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
