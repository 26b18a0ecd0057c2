"""MMEngine's logging API over rlearn's metric store (see docs/logging.md).

* :class:`MessageHub` (``update_scalar(s)``, ``get_scalar``, ``log_scalars``, runtime info) is the way
  into the run's :class:`~rlearn.monitor.TickMonitor`, beside the keys a policy returns;
* :class:`HistoryBuffer` (defined in :mod:`rlearn.monitor.history_buffer`) is a key's history and the
  registry of statistics (``statistics``, ``register_statistics``);
* :class:`LogProcessor` chooses the statistics of each monitored key (``custom_cfg``);
* :class:`MMLogger` / :func:`get_logger` / :func:`print_log` give :class:`logging.Logger` s with
  rlearn's line format and per-rank files.
"""

from rlearn.logging.log_processor import LogProcessor, LogProcessorConfigError
from rlearn.logging.logger import MMLogger, get_current_instance, get_instance, get_logger, get_rank, print_log
from rlearn.logging.message_hub import MessageHub
from rlearn.monitor.history_buffer import HistoryBuffer
from rlearn.monitor.scalars import to_float

__all__ = [
    "HistoryBuffer",
    "MessageHub",
    "LogProcessor",
    "LogProcessorConfigError",
    "MMLogger",
    "get_logger",
    "get_instance",
    "get_current_instance",
    "print_log",
    "get_rank",
    "to_float",
]
