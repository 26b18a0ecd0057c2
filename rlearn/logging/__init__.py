"""Storage, bus and formatting of logged scalars (MMEngine's split, made O(1) and bounded).

* :class:`HistoryBuffer` keeps the bounded history of one scalar and computes windowed statistics;
* :class:`MessageHub` is the named bus where components publish scalars and runtime info;
* :class:`LogProcessor` decides which statistic of each scalar is shown;
* :func:`get_logger` returns a :class:`logging.Logger` with rlearn's line format and per-rank files.

See ``docs/logging.md``.
"""

from rlearn.logging.history_buffer import HistoryBuffer, UnknownStatisticError, to_float
from rlearn.logging.log_processor import LogProcessor, LogProcessorConfigError
from rlearn.logging.logger import get_logger, get_rank
from rlearn.logging.message_hub import MessageHub

__all__ = [
    "HistoryBuffer",
    "MessageHub",
    "LogProcessor",
    "LogProcessorConfigError",
    "UnknownStatisticError",
    "get_logger",
    "get_rank",
    "to_float",
]
