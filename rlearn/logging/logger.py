"""``get_logger``: a configured :class:`logging.Logger` (format, colours, warning de-duplication, rank files)."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from rlearn.distributed.utils import get_rank

__all__ = ["MMLogger", "get_logger", "get_rank", "rank_log_file", "get_instance", "get_current_instance", "print_log"]

_COLOURS = {logging.DEBUG: "\033[36m", logging.WARNING: "\033[33m", logging.ERROR: "\033[31m",
            logging.CRITICAL: "\033[1;31m"}  # cyan, yellow, red, bold red


class RlearnFormatter(logging.Formatter):
    """``MM/DD HH:MM:SS - name - LEVEL - message``, ERROR and above with ``path - function - line - ``; the level
    name in ANSI colours with ``color=True``, or with ``color=None`` when ``sys.stdout`` is a terminal."""

    def __init__(self, color: Optional[bool] = False, datefmt: str = "%m/%d %H:%M:%S") -> None:
        super().__init__(datefmt=datefmt)
        self.color = color

    def usesTime(self) -> bool:  # noqa: N802 - logging API name
        return True

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging API name
        level = min(max(record.levelno // 10 * 10, logging.DEBUG), logging.CRITICAL)  # a custom level: the one below
        try:
            colour = self.color or self.color is None and sys.stdout.isatty()
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            colour = False
        name = f"{_COLOURS[level]}%(levelname)s\033[0m" if colour and level in _COLOURS else "%(levelname)s"
        location = "%(pathname)s - %(funcName)s - %(lineno)d - " if level >= logging.ERROR else ""
        return f"%(asctime)s - %(name)s - {name} - {location}%(message)s" % record.__dict__


class DuplicateWarningFilter(logging.Filter):
    """Lets a WARNING text through the first time only (remembering the last ``max_seen``)."""

    def __init__(self, max_seen: int = 10_000) -> None:
        super().__init__()
        self.max_seen = max_seen
        self._seen: Dict[str, None] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        message = record.getMessage()
        if message in self._seen:
            return False
        self._seen[message] = None
        if len(self._seen) > self.max_seen:
            del self._seen[next(iter(self._seen))]
        return True


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stdout`` is at emit time, in colours when it is a terminal."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)
        self.setFormatter(RlearnFormatter(color=None))

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout  # under the handler's lock (Handler.handle)
        super().emit(record)


def _parse_level(log_level: Union[str, int]) -> int:
    levels = logging.getLevelNamesMapping()  # DEBUG, INFO, WARN(ING), ERROR, CRITICAL, FATAL, NOTSET
    level = levels.get(log_level.upper()) if isinstance(log_level, str) else log_level
    if type(level) is int and level in levels.values():
        return level
    raise ValueError(f"unknown log_level {log_level!r}; use one of DEBUG, INFO, WARNING, ERROR, CRITICAL or 0-50 by 10")


def rank_log_file(log_file: Union[str, Path], rank: int) -> Path:
    """The log file of ``rank``: ``log_file`` itself for rank 0, ``<stem>_rank<r><ext>`` beside it otherwise."""
    path = Path(log_file)
    return path if rank == 0 else path.with_name(f"{path.stem}_rank{rank}{path.suffix}")


def get_logger(name: str = "rlearn", log_file: Optional[Union[str, Path]] = None, log_level: Union[str, int] = "INFO",
               distributed: bool = False, file_handler_cfg: Optional[Mapping[str, Any]] = None) -> "MMLogger":
    """The logger ``name`` (an :class:`MMLogger`) set up the rlearn way (docs/logging.md, MMLogger and get_logger).

    A stdout handler (colours on a terminal; ERROR and above only on ranks other than 0), repeated WARNING texts
    dropped, ``propagate = False``; with ``log_file`` rank 0 appends to it and, with ``distributed=True``, rank
    ``r > 0`` to ``<stem>_rank<r><ext>`` beside it, through a ``logging.FileHandler`` or the handler
    ``file_handler_cfg`` names (``dict(type='RotatingFileHandler', maxBytes=...)``). Calling it again reuses the
    handlers and updates the level. An unknown ``log_level`` raises ``ValueError``.
    """
    logger = logging.getLogger(_check_name(name))
    if not isinstance(logger, MMLogger):
        logger.__class__ = MMLogger  # the registered logger of that name becomes an MMLogger (it adds no state)
    logger.instance_name = name  # type: ignore[attr-defined]
    _configure(logger, log_level, log_file, distributed, file_handler_cfg)
    return MMLogger._instance_dict.setdefault(name, logger)  # type: ignore[arg-type]


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"logger name must be a non-empty str; got {name!r}")
    return name


def _configure(logger: logging.Logger, log_level: Union[str, int], log_file: Optional[Union[str, Path]],
               distributed: bool, file_handler_cfg: Optional[Mapping[str, Any]]) -> None:
    rank = get_rank()
    logger.setLevel(_parse_level(log_level))
    logger.propagate = False
    if not any(isinstance(f, DuplicateWarningFilter) for f in logger.filters):
        logger.addFilter(DuplicateWarningFilter())
    stream = next((h for h in logger.handlers if isinstance(h, _StdoutHandler)), None) or _StdoutHandler()
    stream.setLevel(logging.NOTSET if rank == 0 else logging.ERROR)
    logger.addHandler(stream)  # a no-op when it is there already
    path = None if log_file is None or not (rank == 0 or distributed) else rank_log_file(log_file, rank).resolve()
    if path is None or any(Path(getattr(h, "baseFilename", "")) == path for h in logger.handlers):
        return
    cfg = dict(file_handler_cfg or {})
    kind = cfg.pop("type", "FileHandler")
    handler_class = getattr(logging.handlers, str(kind), None) or getattr(logging, str(kind), None)
    if not (isinstance(handler_class, type) and issubclass(handler_class, logging.FileHandler)):
        raise ValueError(f"file_handler_cfg type {kind!r} is not a FileHandler of logging or logging.handlers")
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = handler_class(**{"filename": path, "encoding": "utf-8", **cfg})
    handler.setFormatter(RlearnFormatter(datefmt="%Y/%m/%d %H:%M:%S"))  # a file outlives the year, as MMEngine's
    logger.addHandler(handler)


class MMLogger(logging.Logger):
    """MMEngine's logger: a :class:`logging.Logger` whose ``name`` and ``instance_name`` are the name given.
    ``MMLogger(name, log_file=..., ...)`` is a private logger set up as :func:`get_logger` does."""

    _instance_dict: "OrderedDict[str, MMLogger]" = OrderedDict()  # the shared loggers, the current one last

    def __init__(self, name: str, log_file: Optional[Union[str, Path]] = None, log_level: Union[str, int] = "INFO",
                 distributed: bool = False, file_handler_cfg: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(_check_name(name))
        self.instance_name = name
        _configure(self, log_level, log_file, distributed, file_handler_cfg)

    @classmethod
    def get_instance(cls, name: str, **kwargs: Any) -> "MMLogger":
        """The logger ``name``, set up by :func:`get_logger` on the first call or any call with ``kwargs``; it
        becomes the current one."""
        if kwargs or name not in cls._instance_dict:
            get_logger(name, **kwargs)
        cls._instance_dict.move_to_end(name)
        return cls._instance_dict[name]

    @classmethod
    def get_current_instance(cls) -> "MMLogger":
        """The logger last set up by :func:`get_logger` or returned by :meth:`get_instance` (``'rlearn'`` if none)."""
        return cls.get_instance(next(reversed(cls._instance_dict), "rlearn"))

    @classmethod
    def check_instance_created(cls, name: str) -> bool:
        """Whether a logger ``name`` has been set up by :meth:`get_instance` / :func:`get_logger`."""
        return name in cls._instance_dict


get_instance = MMLogger.get_instance
get_current_instance = MMLogger.get_current_instance


def print_log(msg: Any, logger: Union[logging.Logger, str, None] = None, level: int = logging.INFO) -> None:
    """MMEngine's ``print_log``: ``logger`` None prints, ``'silent'`` drops, ``'current'`` is
    :func:`get_current_instance`, another str names a logger from :func:`get_instance`."""
    if isinstance(logger, str) and logger != "silent":
        if logger == "current":
            logger = get_current_instance()
        elif MMLogger.check_instance_created(logger):
            logger = logging.getLogger(logger)
        else:
            raise ValueError(f"print_log: no logger named {logger!r}; create it with get_instance({logger!r}) first")
    if logger is None:
        print(msg)
    elif isinstance(logger, logging.Logger):
        logger.log(level, msg)
    elif not isinstance(logger, str):  # 'silent' drops the message
        raise TypeError(f"print_log: logger must be a logging.Logger, a logger name, 'current', 'silent' or None; "
                        f"got {logger!r}")
