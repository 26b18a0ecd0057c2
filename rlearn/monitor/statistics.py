"""``LogProcessor``: which statistics of each monitored key are shown (MMEngine's ``custom_cfg``,
docs/logging.md): mergeable :class:`~rlearn.monitor.WindowStat` per output name, then the numbers.
A registered statistic is called on a ``HistoryBuffer`` of the window's values."""

from __future__ import annotations

import copy
import inspect
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from rlearn.config.spec import is_int
from rlearn.monitor.tick_monitor import TickMonitor
from rlearn.monitor.window import WindowStat
from rlearn.monitor.history_buffer import BUILTIN_STATISTICS, SUFFIXES, HistoryBuffer
from rlearn.monitor.scalars import check_key, to_float

__all__ = ["LogProcessor", "LogProcessorConfigError", "RESERVED_NAMES"]

#: names every row already has (the writers' own columns) or that the log hook writes beside the statistics
RESERVED_NAMES = ("train_iter", "envstep", "time", "throughput/iters_per_sec", "throughput/env_steps_per_sec",
                  "time/eval_s", "time/checkpoint_s")
_FIELDS = ("data_src", "method_name", "log_name", "window_size", "last_n")


def _arguments(method: Any, extra: Mapping[str, Any], count: int) -> Dict[str, Any]:
    """A registered statistic's keyword arguments: the entry's extra fields, ``window_size`` if it takes one."""
    params = inspect.signature(method).parameters.values()
    if any(p.name == "window_size" or p.kind is p.VAR_KEYWORD for p in params):
        return {"window_size": count, **extra}
    return dict(extra)


class LogProcessorConfigError(ValueError):
    """A ``LogProcessor`` configuration is invalid; the message names the entry index and the field."""


def _registered(name: str) -> Any:
    """The registered statistic ``name`` unless it is a built-in one."""
    method = HistoryBuffer._statistics_methods.get(name)
    return None if method is BUILTIN_STATISTICS.get(name) else method


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
        """Add one ``custom_cfg`` entry (validated against the entries already there)."""
        checked = self._check_entry(len(self.custom_cfg), entry)
        self._check_name(checked)
        self.custom_cfg.append(checked)

    def _check_entry(self, index: int, entry: Mapping[str, Any]) -> Dict[str, Any]:
        where = f"custom_cfg[{index}]"
        if not isinstance(entry, Mapping):
            raise LogProcessorConfigError(f"{where} must be a dict; got {type(entry).__name__}")
        entry = dict(copy.deepcopy(entry))
        for field in ("data_src", "method_name"):
            if field not in entry:
                raise LogProcessorConfigError(f"{where} is missing the required field {field!r}: {entry}")
        for field in ("data_src", "method_name", "log_name"):
            if field in entry and (not isinstance(entry[field], str) or not entry[field]):
                raise LogProcessorConfigError(f"{where}: {field} must be a non-empty str; got {entry[field]!r}")
            if field in entry and field != "method_name":
                try:
                    check_key(entry[field])
                except ValueError as exc:
                    raise LogProcessorConfigError(f"{where}: {field}: {exc}") from None
        where = f"{where} (data_src={entry['data_src']!r})"
        method = HistoryBuffer._statistics_methods.get(entry["method_name"])
        if method is None:
            raise LogProcessorConfigError(
                f"{where}: method_name {entry['method_name']!r} is unknown; the registered statistics are "
                f"{', '.join(HistoryBuffer._statistics_methods)} (add one with @HistoryBuffer.register_statistics)")
        if "window_size" in entry and "last_n" in entry:
            raise LogProcessorConfigError(f"{where}: window_size and last_n are exclusive; give one of them")
        window = entry.get("window_size")
        if window is not None and window != "global" and (not is_int(window) or window < 1):
            hint = " ('epoch' windows are not supported: rlearn counts train iterations)" if window == "epoch" else ""
            raise LogProcessorConfigError(f"{where}: window_size must be a positive int or 'global'; got {window!r}{hint}")
        n = entry.get("last_n", 1)
        if not is_int(n) or n < 1:
            raise LogProcessorConfigError(f"{where}: last_n must be a positive int; got {n!r}")
        extra = {k: v for k, v in entry.items() if k not in _FIELDS}
        if _registered(entry["method_name"]) is None:
            if extra:
                raise LogProcessorConfigError(f"{where}: unknown field(s) {sorted(map(str, extra))}; the fields are "
                                              f"{list(_FIELDS)} (a registered statistic takes its own)")
        else:
            if window == "global":
                raise LogProcessorConfigError(f"{where}: window_size='global' keeps aggregates, not values; the "
                                              f"registered statistic {entry['method_name']!r} needs an int window_size or last_n")
            try:
                inspect.signature(method).bind(None, **_arguments(method, extra, 0))
            except TypeError as exc:
                raise LogProcessorConfigError(f"{where}: the fields do not fit the statistic {entry['method_name']!r}"
                                              f"{inspect.signature(method)}: {exc}") from None
        entry["name"] = self._output_name(entry)
        entry["index"] = index
        if entry["name"] in RESERVED_NAMES:
            raise LogProcessorConfigError(f"{where}: log_name {entry['name']!r} is a reserved column name (every row "
                                          f"has {', '.join(RESERVED_NAMES)}); choose another")
        return entry

    @staticmethod
    def _output_name(entry: Mapping[str, Any]) -> str:
        src = entry["data_src"]
        if "log_name" not in entry:
            return f"{src}_{SUFFIXES.get(entry['method_name'], entry['method_name'])}"
        name = entry["log_name"]
        if "/" not in name and "/" in src:
            name = f"{src.rsplit('/', 1)[0]}/{name}"
        return name

    def _check_name(self, entry: Mapping[str, Any]) -> None:
        where = f"custom_cfg[{entry['index']}] (data_src={entry['data_src']!r})"
        for other in self.custom_cfg:
            if "log_name" not in entry and "log_name" not in other and other["data_src"] == entry["data_src"]:
                raise LogProcessorConfigError(
                    f"{where}: method_name: custom_cfg[{other['index']}] already replaces the statistic of "
                    f"{entry['data_src']!r}; give one of them a log_name to add it instead")
            if other["name"] == entry["name"]:
                raise LogProcessorConfigError(f"{where}: log_name: custom_cfg[{other['index']}] already produces "
                                              f"{entry['name']!r}; choose another log_name")
            if "log_name" in entry and entry["name"] == f"{other['data_src']}_avg":
                raise LogProcessorConfigError(f"{where}: log_name {entry['name']!r} is the default name of "
                                              f"{other['data_src']!r}; choose another")

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
            window = entry.get("window_size")
            if window == "global":
                monitor.keep(entry["data_src"], since_start=True)
            elif window is not None and window != monitor.window_size(entry["data_src"]):
                monitor.keep(entry["data_src"], window=window)
            elif "last_n" in entry:
                monitor.keep(entry["data_src"], last_n=entry["last_n"])

    @staticmethod
    def _stat(monitor: TickMonitor, entry: Mapping[str, Any], end: Optional[int]) -> WindowStat:
        key, window = entry["data_src"], entry.get("window_size")
        options = dict(window=None if window in (None, "global") else window, last_n=entry.get("last_n"),
                       since_start=window == "global")
        stat = monitor.window_stat(key, end, **options)
        if _registered(entry["method_name"]) is not None:  # it needs the values themselves
            stat = stat.with_values(monitor.window_values(key, end, window=options["window"], last_n=options["last_n"]))
        return stat

    def window_stats(self, monitor: TickMonitor, keys: Sequence[str], end: Optional[int] = None) -> Dict[str, WindowStat]:
        """Output name -> partial aggregate for ``keys`` in display order (a key's default, then its additions),
        of the windows ending at ``end`` (see ``TickMonitor``)."""
        out: Dict[str, WindowStat] = {}
        owner: Dict[str, str] = {}
        replacing: Dict[str, Any] = {}
        added: Dict[str, List[Any]] = {}
        for e in self.custom_cfg:
            if "log_name" in e:
                added.setdefault(e["data_src"], []).append(e)
            else:
                replacing[e["data_src"]] = e
        for key in keys:
            for entry in (replacing.get(key), *added.get(key, ())):
                name = f"{key}_avg" if entry is None else entry["name"]
                if name in out:
                    raise LogProcessorConfigError(f"output name {name!r} is produced by both {owner[name]} and {key!r}; "
                                                  "rename one of them (custom_cfg log_name)")
                out[name] = monitor.window_stat(key, end) if entry is None else self._stat(monitor, entry, end)
                owner[name] = repr(key)
        return out

    def values(self, stats: Mapping[str, WindowStat]) -> Dict[str, Union[float, int, None]]:
        """Output name -> final number (None for an empty window); ``'<key>_nonfinite'`` follows a key's
        entries where its own window holds NaN/inf."""
        entries = {e["name"]: e for e in self.custom_cfg}
        out: Dict[str, Union[float, int, None]] = {}
        pending: Dict[str, int] = {}
        previous_key: Optional[str] = None
        for name, stat in stats.items():
            entry = entries.get(name)
            key = entry["data_src"] if entry else (name[: -len("_avg")] if name.endswith("_avg") else name)
            if previous_key is not None and key != previous_key and pending.get(previous_key):
                out[f"{previous_key}_nonfinite"] = pending.pop(previous_key)
            if entry is None or "log_name" not in entry:
                pending[key] = stat.nonfinite  # the key's own (default or replacing) statistic
            out[name] = stat.avg if entry is None else self._value(entry, stat)
            previous_key = key
        if previous_key is not None and pending.get(previous_key):
            out[f"{previous_key}_nonfinite"] = pending[previous_key]
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
