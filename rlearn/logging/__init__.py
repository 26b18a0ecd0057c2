"""Statistics, bus and text logging of the metric path (see docs/logging.md).

* :class:`LogProcessor` chooses the statistics of each monitored key (MMEngine's ``custom_cfg``),
  reading a :class:`~rlearn.monitor.TickMonitor`;
* :class:`MessageHub` is the named bus of runtime state (iteration, env steps, learning rates, last
  evaluation);
* :func:`get_logger` / :func:`get_instance` / :func:`print_log` give :class:`logging.Logger` s with
  rlearn's line format and per-rank files;
* :class:`HistoryBuffer` (defined in :mod:`rlearn.monitor.history_buffer`) is re-exported here.
"""

from rlearn.logging.log_processor import LogProcessor, LogProcessorConfigError
from rlearn.logging.logger import get_current_instance, get_instance, get_logger, get_rank, print_log
from rlearn.logging.message_hub import MessageHub
from rlearn.monitor.history_buffer import HistoryBuffer
from rlearn.monitor.scalars import to_float

__all__ = [
    "HistoryBuffer",
    "MessageHub",
    "LogProcessor",
    "LogProcessorConfigError",
    "get_logger",
    "get_instance",
    "get_current_instance",
    "print_log",
    "get_rank",
    "to_float",
]
