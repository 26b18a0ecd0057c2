"""``get_logger``: a configured :class:`logging.Logger` (format, colours, warning de-duplication, rank files)."""

from __future__ import annotations

import logging
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional, Union

from rlearn.distributed.utils import get_rank

__all__ = ["MMLogger", "get_logger", "get_rank", "rank_log_file", "get_instance", "get_current_instance", "print_log"]

DATE_FORMAT = "%m/%d %H:%M:%S"
_BASE = "%(asctime)s - %(name)s - {level} - "
_LOCATION = "%(pathname)s - %(funcName)s - %(lineno)d - "
_COLOURS = {
    logging.DEBUG: "\033[36m",  # cyan
    logging.WARNING: "\033[33m",  # yellow
    logging.ERROR: "\033[31m",  # red
    logging.CRITICAL: "\033[1;31m",  # bold red
}
_RESET = "\033[0m"
_MARK = "_rlearn_handler"  # attribute set on the handlers get_logger installs


class RlearnFormatter(logging.Formatter):
    """``MM/DD HH:MM:SS - name - LEVEL - message``, ERROR and above with ``path - function - line - ``;
    ``color=True`` wraps the level name in ANSI colours."""

    def __init__(self, color: bool = False) -> None:
        super().__init__(datefmt=DATE_FORMAT)
        self._styles = {}
        for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL):
            name = f"{_COLOURS[level]}%(levelname)s{_RESET}" if color and level in _COLOURS else "%(levelname)s"
            fmt = _BASE.format(level=name) + (_LOCATION if level >= logging.ERROR else "") + "%(message)s"
            self._styles[level] = logging.PercentStyle(fmt)

    def usesTime(self) -> bool:  # noqa: N802 - logging API name
        return True

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging API name
        level = max((lv for lv in self._styles if lv <= record.levelno), default=logging.DEBUG)
        return self._styles[level].format(record)


class DuplicateWarningFilter(logging.Filter):
    """Lets a WARNING text through the first time only (remembering the last ``max_seen``)."""

    def __init__(self, max_seen: int = 10_000) -> None:
        super().__init__()
        self.max_seen = max_seen
        self._seen: "OrderedDict[str, None]" = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        message = record.getMessage()
        if message in self._seen:
            return False
        self._seen[message] = None
        if len(self._seen) > self.max_seen:
            self._seen.popitem(last=False)
        return True


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stdout`` is at emit time; colours only when it is a TTY."""

    def __init__(self) -> None:
        super().__init__()
        self._plain = RlearnFormatter(color=False)
        self._colour = RlearnFormatter(color=True)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stdout

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns it; we always follow sys.stdout
        pass

    def format(self, record: logging.LogRecord) -> str:
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        return (self._colour if tty else self._plain).format(record)


def _parse_level(log_level: Union[str, int]) -> int:
    if type(log_level) is int and log_level in (0, 10, 20, 30, 40, 50):
        return log_level
    names = ("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL", "NOTSET")
    if isinstance(log_level, str) and log_level.upper() in names:
        return int(getattr(logging, log_level.upper()))
    raise ValueError(f"unknown log_level {log_level!r}; use one of DEBUG, INFO, WARNING, ERROR, CRITICAL or 0-50 by 10")


def rank_log_file(log_file: Union[str, Path], rank: int) -> Path:
    """The log file of ``rank``: ``log_file`` itself for rank 0, ``<stem>_rank<r><ext>`` beside it otherwise."""
    path = Path(log_file)
    return path if rank == 0 else path.with_name(f"{path.stem}_rank{rank}{path.suffix}")


def get_logger(
    name: str = "rlearn",
    log_file: Optional[Union[str, Path]] = None,
    log_level: Union[str, int] = "INFO",
    distributed: bool = False,
) -> "MMLogger":
    """Return the logger ``name`` (an :class:`MMLogger`) set up the rlearn way (docs/logging.md, section MMLogger
    and get_logger).

    A stdout handler (colours on a terminal; ERROR and above only on ranks other than 0), repeated
    WARNING texts dropped, ``propagate = False``; with ``log_file`` rank 0 appends to it and, with
    ``distributed=True``, rank ``r > 0`` to ``<stem>_rank<r><ext>`` beside it. Calling it again reuses
    the handlers and updates the level. An unknown ``log_level`` raises ``ValueError``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"logger name must be a non-empty str; got {name!r}")
    level = _parse_level(log_level)
    logger = logging.getLogger(name)
    if not isinstance(logger, MMLogger):
        logger.__class__ = MMLogger  # the registered logger of that name becomes an MMLogger (it adds no state)
    logger.instance_name = name  # type: ignore[attr-defined]
    _configure(logger, level, log_file, distributed)
    return logger  # type: ignore[return-value]


def _configure(logger: logging.Logger, level: int, log_file: Optional[Union[str, Path]], distributed: bool) -> None:
    rank = get_rank()
    logger.setLevel(level)
    logger.propagate = False
    if not any(isinstance(f, DuplicateWarningFilter) for f in logger.filters):
        logger.addFilter(DuplicateWarningFilter())
    ours = [h for h in logger.handlers if getattr(h, _MARK, None)]
    if not any(getattr(h, _MARK) == "stream" for h in ours):
        stream = _StdoutHandler()
        setattr(stream, _MARK, "stream")
        logger.addHandler(stream)
    for handler in logger.handlers:
        if getattr(handler, _MARK, None) == "stream":
            handler.setLevel(logging.NOTSET if rank == 0 else logging.ERROR)
    if log_file is not None and (rank == 0 or distributed):
        path = rank_log_file(log_file, rank).resolve()
        if not any(getattr(h, _MARK, None) == "file" and Path(h.baseFilename) == path for h in ours):
            path.parent.mkdir(parents=True, exist_ok=True)
            file_handler = logging.FileHandler(path, mode="a", encoding="utf-8")
            file_handler.setFormatter(RlearnFormatter(color=False))
            setattr(file_handler, _MARK, "file")
            logger.addHandler(file_handler)


_current_name: Optional[str] = None


def get_instance(name: str, **kwargs: Any) -> "MMLogger":
    """MMEngine's ``MMLogger.get_instance``: the logger ``name``, set up by :func:`get_logger` on the first
    call or any call with ``kwargs``, which becomes the current one."""
    global _current_name
    if kwargs or not MMLogger.check_instance_created(name):
        get_logger(name, **kwargs)
    _current_name = name
    return logging.getLogger(name)  # type: ignore[return-value]


def get_current_instance() -> "MMLogger":
    """The logger most recently returned by :func:`get_instance` (``'rlearn'``, created, if none)."""
    return get_instance("rlearn" if _current_name is None else _current_name)


class MMLogger(logging.Logger):
    """MMEngine's logger: a :class:`logging.Logger` whose ``name`` and ``instance_name`` are the name given.

    ``MMLogger(name, log_file=..., log_level=..., distributed=...)`` makes a private logger set up as
    :func:`get_logger` does; :meth:`get_instance` the shared logger of that name (the current one after).
    """

    def __init__(self, name: str, log_file: Optional[Union[str, Path]] = None, log_level: Union[str, int] = "INFO",
                 distributed: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"logger name must be a non-empty str; got {name!r}")
        super().__init__(name)
        self.instance_name = name
        _configure(self, _parse_level(log_level), log_file, distributed)

    get_instance = staticmethod(get_instance)
    get_current_instance = staticmethod(get_current_instance)

    @staticmethod
    def check_instance_created(name: str) -> bool:
        """Whether a logger ``name`` has been set up by :meth:`get_instance` / :func:`get_logger`."""
        known = logging.Logger.manager.loggerDict.get(name)
        return isinstance(known, logging.Logger) and any(getattr(h, _MARK, None) for h in known.handlers)


def print_log(msg: Any, logger: Union[logging.Logger, str, None] = None, level: int = logging.INFO) -> None:
    """MMEngine's ``print_log``: ``logger`` None prints, ``'silent'`` drops, ``'current'`` is
    :func:`get_current_instance`, another str names a logger from :func:`get_instance`."""
    if logger is None:
        print(msg)
    elif isinstance(logger, logging.Logger):
        logger.log(level, msg)
    elif logger == "silent":
        return
    elif logger == "current":
        get_current_instance().log(level, msg)
    elif isinstance(logger, str):
        if not MMLogger.check_instance_created(logger):
            raise ValueError(f"print_log: no logger named {logger!r}; create it with get_instance({logger!r}) first")
        logging.getLogger(logger).log(level, msg)
    else:
        raise TypeError(
            f"print_log: logger must be a logging.Logger, a logger name, 'current', 'silent' or None; got {logger!r}"
        )
