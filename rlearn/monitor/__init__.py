"""Storage of every monitored number: :class:`TickMonitor` (tick-aware sliding windows, see
docs/monitoring.md), the scalar conversion (:mod:`rlearn.monitor.scalars`) and :class:`HistoryBuffer`
(a bounded ring of the last values of one scalar)."""

from rlearn.monitor.history_buffer import HistoryBuffer
from rlearn.monitor.scalars import is_scalar, to_float, to_floats
from rlearn.monitor.tick_monitor import TickMonitor

__all__ = ["TickMonitor", "HistoryBuffer", "is_scalar", "to_float", "to_floats"]
