"""MMEngine's logging API over rlearn's metric store (docs/logging.md): :class:`MessageHub` (the way into
the run's monitor), :class:`HistoryBuffer` (a key's history, the registry of statistics),
:class:`LogProcessor` (``custom_cfg``), :class:`MMLogger` / :func:`get_logger` / :func:`print_log`."""

from rlearn.logging.log_processor import LogProcessor, LogProcessorConfigError
from rlearn.logging.logger import MMLogger, get_current_instance, get_instance, get_logger, print_log
from rlearn.logging.message_hub import MessageHub
from rlearn.monitor.history_buffer import HistoryBuffer

__all__ = ["HistoryBuffer", "MessageHub", "LogProcessor", "LogProcessorConfigError", "MMLogger", "get_logger",
           "get_instance", "get_current_instance", "print_log"]
