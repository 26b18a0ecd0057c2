"""``LogProcessor`` lives in :mod:`rlearn.monitor.statistics`; this is where MMEngine users import it from."""

from rlearn.monitor.statistics import RESERVED_NAMES, LogProcessor, LogProcessorConfigError

__all__ = ["LogProcessor", "LogProcessorConfigError", "RESERVED_NAMES"]
