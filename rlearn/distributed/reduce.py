"""Cross-rank reduction of window statistics by presence (:meth:`rlearn.monitor.WindowStat.merge_ranks`): a key
reported by 3 of 4 ranks is averaged over those 3, never diluted by zeros; all keys travel in one collective."""

from typing import Dict, Mapping

from rlearn.distributed.utils import all_gather_object
from rlearn.monitor.window import WindowStat

__all__ = ["WindowStat", "merge_window_stats", "reduce_window_stats"]

merge_window_stats = WindowStat.merge_ranks


def reduce_window_stats(local: Mapping[str, WindowStat]) -> Dict[str, WindowStat]:
    """Merge ``local`` with every other rank's summary (one ``all_gather_object``; identity in one process)."""
    return merge_window_stats(all_gather_object(dict(local)))
