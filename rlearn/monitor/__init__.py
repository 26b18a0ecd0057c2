"""The metric path (docs/monitoring.md): the store (:class:`TickMonitor`, windows of :class:`WindowStat`,
the one aggregate type, which also merges ranks), the statistics (:class:`LogProcessor`, the registry of
:class:`HistoryBuffer`), the scalar conversion and the key bookkeeping of a learner (:class:`Metrics`)."""

from rlearn.monitor.history_buffer import HistoryBuffer
from rlearn.monitor.scalars import check_key, is_scalar, to_float, to_floats
from rlearn.monitor.tick_monitor import TickMonitor
from rlearn.monitor.window import WindowStat
from rlearn.monitor.statistics import LogProcessor, LogProcessorConfigError
from rlearn.monitor.metrics import IrregularKey, Metrics, irregular

__all__ = ["TickMonitor", "WindowStat", "HistoryBuffer", "LogProcessor", "LogProcessorConfigError", "Metrics",
           "IrregularKey", "irregular", "is_scalar", "to_float", "to_floats", "check_key"]
