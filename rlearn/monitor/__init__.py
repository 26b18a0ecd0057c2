"""The one store of every monitored number: :class:`TickMonitor` (tick-aware sliding windows, see
docs/monitoring.md) with :class:`WindowStat` (a window's aggregate, mergeable across ranks), the scalar
conversion (:mod:`rlearn.monitor.scalars`) and :class:`HistoryBuffer` (a key's history and the registry of
statistics)."""

from rlearn.monitor.history_buffer import HistoryBuffer
from rlearn.monitor.scalars import is_scalar, to_float, to_floats
from rlearn.monitor.tick_monitor import TickMonitor
from rlearn.monitor.window import WindowStat

__all__ = ["TickMonitor", "WindowStat", "HistoryBuffer", "is_scalar", "to_float", "to_floats"]
