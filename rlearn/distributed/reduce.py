"""Cross-rank reduction of monitor windows, by presence.

Each rank summarises its window of every key as a :class:`WindowStat` (sum, count, min, max and the
number of non-finite values). Merging adds sums and counts of the ranks that *have* values, so a key
reported by 3 of 4 ranks is averaged over those 3, weighted by their counts — never diluted by zeros from
the rank that did not report it. All keys travel in one collective per log interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional

from rlearn.distributed.utils import all_gather_object


@dataclass(frozen=True)
class WindowStat:
    """Summary of one key's window on one rank (or merged over ranks)."""

    sum: float
    count: int
    min: Optional[float]
    max: Optional[float]
    nonfinite: int = 0

    @property
    def avg(self) -> Optional[float]:
        """Mean of the finite values, or None when there are none (never 0)."""
        return self.sum / self.count if self.count else None


def local_window_stats(monitor: Any, keys: Iterable[str]) -> Dict[str, WindowStat]:
    """Summarise ``monitor``'s current window for ``keys`` (a TickMonitor or anything with the same API).

    Keys with neither finite nor non-finite values in the window are left out, which is what "presence"
    means for the merge.
    """
    stats: Dict[str, WindowStat] = {}
    for key in keys:
        count = monitor.count(key)
        nonfinite = monitor.nonfinite(key)
        if count == 0 and nonfinite == 0:
            continue
        avg = monitor.avg(key)
        stats[key] = WindowStat(
            sum=float(avg) * count if count else 0.0,
            count=int(count),
            min=monitor.min(key),
            max=monitor.max(key),
            nonfinite=int(nonfinite),
        )
    return stats


def merge_window_stats(per_rank: List[Mapping[str, WindowStat]]) -> Dict[str, WindowStat]:
    """Merge the summaries of several ranks; the result keeps the first-seen key order."""
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
            )
    return merged


def reduce_window_stats(local: Mapping[str, WindowStat]) -> Dict[str, WindowStat]:
    """Merge ``local`` with every other rank's summary (one ``all_gather_object``; identity in one process)."""
    return merge_window_stats(all_gather_object(dict(local)))


def _combine(fn, a: Optional[float], b: Optional[float]) -> Optional[float]:
    values = [v for v in (a, b) if v is not None and math.isfinite(v)]
    return fn(values) if values else None
