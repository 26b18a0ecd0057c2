"""Per-iteration metrics with sliding windows: :class:`TickMonitor` (see docs/monitoring.md)."""

from rlearn.monitor.tick_monitor import TickMonitor

__all__ = ["TickMonitor"]
