"""The one store of every monitored number (docs/monitoring.md): :class:`TickMonitor`, :class:`WindowStat`
(a window's aggregate, mergeable across ranks), the scalar conversion and :class:`HistoryBuffer`."""

from rlearn.monitor.history_buffer import HistoryBuffer
from rlearn.monitor.scalars import is_scalar, to_float, to_floats
from rlearn.monitor.tick_monitor import TickMonitor
from rlearn.monitor.window import WindowStat

__all__ = ["TickMonitor", "WindowStat", "HistoryBuffer", "is_scalar", "to_float", "to_floats"]
