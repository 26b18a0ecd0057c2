"""The statistics step of the metric path: monitor windows -> the named values every writer receives.

``policy / collector / evaluator -> TickMonitor -> WindowStatistics -> writers``. One class so that the
step can be replaced as a whole (the seed-000 ``LogProcessor`` with ``custom_cfg`` is meant to take this
place: same two calls, ``window_stats`` and ``values``).

What it computes (the numbers rlearn has always shown):

* ``<key>_avg``: mean of the finite values of ``key`` in its window, ``None`` when the window holds none;
* ``<key>_nonfinite``: how many NaN/inf values the window holds, only when there are some.

In a multi-process run the learner gathers every rank's :class:`~rlearn.distributed.WindowStat` and
merges them by presence (:func:`~rlearn.distributed.merge_window_stats`) between the two calls.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from rlearn.distributed import WindowStat
from rlearn.writers.base import ScalarValue

__all__ = ["WindowStatistics"]


@dataclass(frozen=True)
class _LocalStat(WindowStat):
    """A :class:`WindowStat` that also carries the monitor's own mean, so a key's ``_avg`` is exactly
    ``monitor.avg(key)`` (``sum / count`` could differ in the last bit). Merged stats are plain ones."""

    mean: Optional[float] = None

    @property
    def avg(self) -> Optional[float]:
        return self.mean if self.mean is not None else super().avg


def _accepts_end(monitor: Any) -> bool:
    try:
        return "end" in inspect.signature(monitor.avg).parameters
    except (TypeError, ValueError):
        return False


class WindowStatistics:
    """Per-key window statistics of a :class:`~rlearn.monitor.TickMonitor`.

    Args:
        custom_cfg: the ``learner.log_processor.custom_cfg`` entries (``LogProcessor`` semantics: mean /
            min / max / current / count per key, own windows, extra ``log_name``). This step computes the
            defaults only; a non-empty list is refused with a ValueError that says so, rather than
            silently showing other numbers than the config asks for.
    """

    def __init__(self, custom_cfg: Sequence[Mapping[str, Any]] = ()) -> None:
        self.custom_cfg: List[Mapping[str, Any]] = list(custom_cfg)
        if self.custom_cfg:
            raise ValueError(
                "learner.log_processor.custom_cfg: this build computes the default statistics only "
                "(<key>_avg, <key>_nonfinite); custom_cfg entries need the LogProcessor statistics step"
            )

    def window_stats(self, monitor: Any, keys: Iterable[str], end: Optional[int] = None) -> Dict[str, WindowStat]:
        """``{key: WindowStat}`` of the keys whose window holds a value (finite or not); absent keys are
        left out (what "presence" means when ranks are merged).

        ``end``: the last tick the windows cover (None: the current tick). Passed to the monitor when it
        supports windows ending before the current tick; otherwise the current windows are used.
        """
        kwargs = {"end": end} if end is not None and _accepts_end(monitor) else {}
        stats: Dict[str, WindowStat] = {}
        for key in keys:
            count = monitor.count(key, **kwargs)
            nonfinite = monitor.nonfinite(key, **kwargs)
            if count == 0 and nonfinite == 0:
                continue
            avg = monitor.avg(key, **kwargs)
            stats[key] = _LocalStat(
                sum=float(avg) * count if count else 0.0,
                count=int(count),
                min=monitor.min(key, **kwargs),
                max=monitor.max(key, **kwargs),
                nonfinite=int(nonfinite),
                mean=avg,
            )
        return stats

    def values(self, stats: Mapping[str, WindowStat], keys: Iterable[str]) -> Dict[str, ScalarValue]:
        """The shown values, in ``keys`` order: ``<key>_avg`` for every key (None where ``stats`` has
        nothing), followed by ``<key>_nonfinite`` where the window holds non-finite values."""
        out: Dict[str, ScalarValue] = {}
        for key in keys:
            stat = stats.get(key)
            out[f"{key}_avg"] = stat.avg if stat is not None else None
            if stat is not None and stat.nonfinite:
                out[f"{key}_nonfinite"] = int(stat.nonfinite)
        return out
