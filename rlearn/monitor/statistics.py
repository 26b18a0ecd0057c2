"""``LogProcessor``: which statistics of each monitored key are shown (MMEngine's ``custom_cfg``,
docs/logging.md): a mergeable :class:`~rlearn.monitor.WindowStat` per output name, then the numbers.
A registered statistic is called on a ``HistoryBuffer`` of the window's values."""

from __future__ import annotations

import copy
import inspect
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from rlearn.monitor.history_buffer import BUILTIN_STATISTICS, SUFFIXES, HistoryBuffer, dd_div
from rlearn.monitor.scalars import check_key, to_float
from rlearn.monitor.tick_monitor import TickMonitor
from rlearn.monitor.window import WindowStat
from rlearn.values import is_int

__all__ = ["LogProcessor", "LogProcessorConfigError", "RESERVED_NAMES"]

#: names every row already has (the writers' own columns) or that the log hook writes beside the statistics
RESERVED_NAMES = ("train_iter", "envstep", "time", "throughput/iters_per_sec", "throughput/env_steps_per_sec",
                  "time/eval_s", "time/checkpoint_s")
_FIELDS = ("data_src", "method_name", "log_name", "window_size", "last_n")


class LogProcessorConfigError(ValueError):
    """A ``LogProcessor`` configuration is invalid; the message names the entry index and the field."""


def _registered(name: str) -> Any:
    """The registered statistic ``name`` unless it is a built-in one (those read the aggregate)."""
    method = HistoryBuffer._statistics_methods.get(name)
    return None if method is BUILTIN_STATISTICS.get(name) else method


def _arguments(method: Any, extra: Mapping[str, Any], count: int) -> Dict[str, Any]:
    """A registered statistic's keyword arguments: the entry's extra fields, ``window_size`` if it takes one."""
    params = inspect.signature(method).parameters.values()
    if any(p.name == "window_size" or p.kind is p.VAR_KEYWORD for p in params):
        return {"window_size": count, **extra}
    return dict(extra)


class LogProcessor:
    """Chooses the statistics of each monitored key that the table and every writer show.

    Args:
        window_size: the default window of the monitor, in train iterations (None keeps the monitor's).
        by_epoch: must be False (an RL run has no epochs).
        custom_cfg: entries ``dict(data_src=key, method_name=statistic, log_name=..., window_size=int |
            'global', last_n=int)`` (docs/logging.md, section LogProcessor). ``method_name`` comes from
            ``HistoryBuffer``'s registry; without ``log_name`` an entry replaces the key's default
            ``f"{key}_avg"``, with it it adds ``log_name``.

    Errors in an entry raise :class:`LogProcessorConfigError` (a ``ValueError``) naming its index and field.
    """

    def __init__(self, window_size: Optional[int] = None, by_epoch: bool = False,
                 custom_cfg: Optional[Sequence[Mapping[str, Any]]] = None) -> None:
        if window_size is not None and (not is_int(window_size) or window_size < 1):
            raise LogProcessorConfigError(f"window_size must be a positive int (train iterations) or None; got {window_size!r}")
        if by_epoch:
            raise LogProcessorConfigError("by_epoch=True: an RL run has no epochs; windows count train iterations "
                                          "(use by_epoch=False and window_size in iterations)")
        self.window_size = window_size
        self.by_epoch = False
        custom_cfg = [] if custom_cfg is None else custom_cfg
        if isinstance(custom_cfg, (Mapping, str)) or not isinstance(custom_cfg, Sequence):
            raise LogProcessorConfigError(f"custom_cfg must be a list of dicts; got {type(custom_cfg).__name__}")
        self.custom_cfg: List[Dict[str, Any]] = []
        for entry in custom_cfg:
            self.add(entry)

    def add(self, entry: Mapping[str, Any]) -> None:
        """Add one ``custom_cfg`` entry (validated, also against the entries already there)."""
        index = len(self.custom_cfg)
        where = f"custom_cfg[{index}]"
        if not isinstance(entry, Mapping):
            raise LogProcessorConfigError(f"{where} must be a dict; got {type(entry).__name__}")
        entry = dict(copy.deepcopy(entry))
        for field in ("data_src", "method_name", "log_name"):
            if field not in entry:
                if field != "log_name":
                    raise LogProcessorConfigError(f"{where} is missing the required field {field!r}: {entry}")
            elif not isinstance(entry[field], str) or not entry[field]:
                raise LogProcessorConfigError(f"{where}: {field} must be a non-empty str; got {entry[field]!r}")
            elif field != "method_name":
                try:
                    check_key(entry[field])
                except ValueError as exc:
                    raise LogProcessorConfigError(f"{where}: {field}: {exc}") from None
        src, name = entry["data_src"], entry["method_name"]
        where = f"{where} (data_src={src!r})"

        def fail(message: str) -> LogProcessorConfigError:
            return LogProcessorConfigError(f"{where}: {message}")

        method = HistoryBuffer._statistics_methods.get(name)
        if method is None:
            raise fail(f"method_name {name!r} is unknown; the registered statistics are "
                       f"{', '.join(HistoryBuffer._statistics_methods)} (add one with @HistoryBuffer.register_statistics)")
        if "window_size" in entry and "last_n" in entry:
            raise fail("window_size and last_n are exclusive; give one of them")
        window = entry.get("window_size")
        if window is not None and window != "global" and (not is_int(window) or window < 1):
            hint = " ('epoch' windows are not supported: rlearn counts train iterations)" if window == "epoch" else ""
            raise fail(f"window_size must be a positive int or 'global'; got {window!r}{hint}")
        if not is_int(entry.get("last_n", 1)) or entry.get("last_n", 1) < 1:
            raise fail(f"last_n must be a positive int; got {entry['last_n']!r}")
        extra = {k: v for k, v in entry.items() if k not in _FIELDS}
        if _registered(name) is None and extra:
            raise fail(f"unknown field(s) {sorted(map(str, extra))}; the fields are {list(_FIELDS)} "
                       "(a registered statistic takes its own)")
        if _registered(name) is not None:
            if window == "global":
                raise fail(f"window_size='global' keeps aggregates, not values; the registered statistic {name!r} "
                           "needs an int window_size or last_n")
            try:
                inspect.signature(method).bind(None, **_arguments(method, extra, 0))
            except TypeError as exc:
                raise fail(f"the fields do not fit the statistic {name!r}{inspect.signature(method)}: {exc}") from None
        output = entry.get("log_name", f"{src}_{SUFFIXES.get(name, name)}")
        if "log_name" in entry and "/" not in output and "/" in src:
            output = f"{src.rsplit('/', 1)[0]}/{output}"
        if output in RESERVED_NAMES:
            raise fail(f"log_name {output!r} is a reserved column name (every row has {', '.join(RESERVED_NAMES)}); "
                       "choose another")
        for other in self.custom_cfg:
            if "log_name" not in entry and "log_name" not in other and other["data_src"] == src:
                raise fail(f"method_name: custom_cfg[{other['index']}] already replaces the statistic of {src!r}; give "
                           "one of them a log_name to add it instead")
            if other["name"] == output:
                raise fail(f"log_name: custom_cfg[{other['index']}] already produces {output!r}; choose another log_name")
            if "log_name" in entry and output == f"{other['data_src']}_avg":
                raise fail(f"log_name {output!r} is the default name of {other['data_src']!r}; choose another")
        entry.update(name=output, index=index)
        self.custom_cfg.append(entry)

    def check_keys(self, keys: Sequence[str]) -> None:
        """Refuse an entry whose output name is the default name (``<key>_avg``) of one of ``keys`` (the
        declared monitor keys) other than its own: a :class:`LogProcessorConfigError` naming both."""
        defaults = {f"{key}_avg": key for key in keys}
        for entry in self.custom_cfg:
            key = defaults.get(entry["name"])
            if key is not None and (key != entry["data_src"] or "log_name" in entry):
                raise LogProcessorConfigError(
                    f"custom_cfg[{entry['index']}] (data_src={entry['data_src']!r}): log_name {entry['name']!r} is the "
                    f"default name of the monitor key {key!r}; choose another log_name")

    def prepare(self, monitor: TickMonitor) -> None:
        """Make ``monitor`` keep what the entries need and :attr:`window_size` (when set) its default window;
        idempotent, before or after a resume."""
        if self.window_size is not None and monitor.default_window_size != self.window_size:
            monitor.set_default_window_size(self.window_size)
        for entry in self.custom_cfg:
            key, window = entry["data_src"], entry.get("window_size")
            if window == "global":
                monitor.keep(key, since_start=True)
            elif window is not None and window != monitor.window_size(key):
                monitor.keep(key, window=window)
            elif "last_n" in entry:
                monitor.keep(key, last_n=entry["last_n"])

    def _entries(self, key: str) -> List[Optional[Dict[str, Any]]]:
        """The entries that show ``key``, in display order: the replacing one (None: the default mean), additions."""
        own = [e for e in self.custom_cfg if e["data_src"] == key]
        return [next((e for e in own if "log_name" not in e), None)] + [e for e in own if "log_name" in e]

    def window_stats(self, monitor: TickMonitor, keys: Sequence[str], end: Optional[int] = None) -> Dict[str, WindowStat]:
        """Output name -> partial aggregate for ``keys`` in display order (a key's default, then its additions),
        of the windows ending at ``end`` (see ``TickMonitor``)."""
        out: Dict[str, WindowStat] = {}
        owner: Dict[str, str] = {}
        for key in keys:
            for entry in self._entries(key) if self.custom_cfg else (None,):
                name = f"{key}_avg" if entry is None else entry["name"]
                if name in out:
                    raise LogProcessorConfigError(f"output name {name!r} is produced by both {owner[name]} and {key!r}; "
                                                  "rename one of them (custom_cfg log_name)")
                owner[name] = repr(key)
                if entry is None:
                    out[name] = monitor.window_stat(key, end)
                    continue
                window = entry.get("window_size")
                options = dict(window=None if window in (None, "global") else window, last_n=entry.get("last_n"))
                out[name] = monitor.window_stat(key, end, since_start=window == "global", **options)
                if _registered(entry["method_name"]) is not None:  # it needs the values themselves
                    out[name] = out[name].with_values(monitor.window_values(key, end, **options))
        return out

    def values(self, stats: Mapping[str, WindowStat]) -> Dict[str, Union[float, int, None]]:
        """Output name -> final number (None for an empty window); ``'<key>_nonfinite'`` follows a key's
        entries where its own window holds NaN/inf."""
        entries = {e["name"]: e for e in self.custom_cfg}
        out: Dict[str, Union[float, int, None]] = {}
        pending: Optional[tuple] = None  # (key, NaN/inf count of its own statistic) until its last entry
        for name, stat in stats.items():
            entry = entries.get(name)
            key = entry["data_src"] if entry else (name[: -len("_avg")] if name.endswith("_avg") else name)
            if pending is not None and pending[0] != key:
                out[f"{pending[0]}_nonfinite"] = pending[1]
                pending = None
            if (entry is None or "log_name" not in entry) and stat.nonfinite:
                pending = (key, stat.nonfinite)
            if entry is None:  # the default mean (``stat.avg``, without the property's call)
                out[name] = dd_div(stat.sum, stat.sum_lo, stat.count) if stat.count else None
            else:
                out[name] = self._value(entry, stat)
        if pending is not None:
            out[f"{pending[0]}_nonfinite"] = pending[1]
        return out

    @staticmethod
    def _value(entry: Mapping[str, Any], stat: WindowStat) -> Union[float, int, None]:
        """The entry's statistic of ``stat``: from the aggregate (built-in) or on the window's values."""
        method = entry["method_name"]
        if _registered(method) is None:
            return stat.statistic(method)
        if not stat.values:
            return None
        extra = {k: v for k, v in entry.items() if k not in _FIELDS + ("name", "index")}
        kwargs = _arguments(HistoryBuffer._statistics_methods[method], extra, len(stat.values))
        result = HistoryBuffer(stat.values, max_length=len(stat.values)).statistics(method, **kwargs)
        try:
            return to_float(result, f"custom_cfg[{entry['index']}] statistic {method!r}")
        except (TypeError, ValueError) as exc:
            raise LogProcessorConfigError(f"custom_cfg[{entry['index']}] (data_src={entry['data_src']!r}): {exc}") from None
