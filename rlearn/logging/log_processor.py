"""``LogProcessor``: which statistics of each monitored key are shown (MMEngine's ``custom_cfg``).

It reads a :class:`~rlearn.monitor.TickMonitor` and returns partial aggregates
(:class:`~rlearn.distributed.WindowStat`, mergeable across ranks) per output name, then the final
numbers the writers show.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from rlearn.distributed.reduce import WindowStat
from rlearn.monitor import TickMonitor

__all__ = ["LogProcessor", "LogProcessorConfigError", "METHODS"]

#: method_name -> suffix of the name of a replacing entry
METHODS = {"mean": "avg", "min": "min", "max": "max", "current": "last", "count": "count", "std": "std"}
_FIELDS = ("data_src", "method_name", "log_name", "window_size", "last_n")


class LogProcessorConfigError(ValueError):
    """A ``LogProcessor`` configuration is invalid; the message names the entry index and the field."""


class LogProcessor:
    """Chooses the statistics of each monitored key that the table and every writer show.

    By default key ``k`` is shown as ``f"{k}_avg"``: the mean over ``k``'s own monitor window. Each
    ``custom_cfg`` entry is a dict with

    * ``data_src`` (required): the full monitor key, e.g. ``'collector/episode_return'``;
    * ``method_name`` (required): ``'mean'``, ``'min'``, ``'max'``, ``'current'`` (the most recent finite
      value), ``'count'`` (number of finite values) or ``'std'`` (population standard deviation);
    * ``log_name`` (optional): without it the entry *replaces* the key's default statistic and is named
      ``f"{k}_{suffix}"`` (suffix avg / min / max / last / count / std); with it the entry is *added*
      after the key's default and named ``log_name`` (a ``log_name`` without ``'/'`` inherits the
      ``'group/'`` prefix of ``data_src``);
    * ``window_size`` (optional): an int (train iterations, i.e. ticks) or ``'global'`` (since the run
      started), or ``last_n`` (optional): the last N values recorded, whenever they were. At most one
      of the two; with neither the entry uses the key's own monitor window.

    Example: ``collector/episode_return`` as its mean (the default) and the max of the last 100 episodes::

        LogProcessor(custom_cfg=[dict(data_src="collector/episode_return", method_name="max",
                                      log_name="episode_return_max100", last_n=100)])
        # -> 'collector/episode_return_avg', 'collector/episode_return_max100'

    Errors in an entry raise :class:`LogProcessorConfigError` (a ``ValueError``) naming its index and field.
    """

    def __init__(self, custom_cfg: Optional[Sequence[Mapping[str, Any]]] = None) -> None:
        if custom_cfg is None:
            custom_cfg = []
        if isinstance(custom_cfg, (Mapping, str)) or not isinstance(custom_cfg, Sequence):
            raise LogProcessorConfigError(f"custom_cfg must be a list of dicts; got {type(custom_cfg).__name__}")
        self.custom_cfg: List[Dict[str, Any]] = []
        for entry in custom_cfg:
            self.add(entry)

    # ------------------------------------------------------------------------------ configuration
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
        unknown = sorted(set(map(str, entry)) - set(_FIELDS))
        if unknown:
            raise LogProcessorConfigError(f"{where}: unknown field(s) {unknown}; the fields are {list(_FIELDS)}")
        for field in ("data_src", "method_name"):
            if field not in entry:
                raise LogProcessorConfigError(f"{where} is missing the required field {field!r}: {entry}")
        for field in ("data_src", "method_name", "log_name"):
            if field in entry and (not isinstance(entry[field], str) or not entry[field]):
                raise LogProcessorConfigError(f"{where}: {field} must be a non-empty str; got {entry[field]!r}")
        where = f"{where} (data_src={entry['data_src']!r})"
        if entry["method_name"] not in METHODS:
            raise LogProcessorConfigError(
                f"{where}: method_name {entry['method_name']!r} is unknown; use one of {', '.join(METHODS)}"
            )
        if "window_size" in entry and "last_n" in entry:
            raise LogProcessorConfigError(f"{where}: window_size and last_n are exclusive; give one of them")
        if "window_size" in entry:
            window = entry["window_size"]
            if window != "global" and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
                hint = " ('epoch' windows are not supported: rlearn counts train iterations)" if window == "epoch" else ""
                raise LogProcessorConfigError(f"{where}: window_size must be a positive int or 'global'; got {window!r}{hint}")
        if "last_n" in entry:
            n = entry["last_n"]
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise LogProcessorConfigError(f"{where}: last_n must be a positive int; got {n!r}")
        entry["name"] = self._output_name(entry)
        entry["index"] = index
        return entry

    @staticmethod
    def _output_name(entry: Mapping[str, Any]) -> str:
        src = entry["data_src"]
        if "log_name" not in entry:
            return f"{src}_{METHODS[entry['method_name']]}"
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
                    f"{entry['data_src']!r}; give one of them a log_name to add it instead"
                )
            if other["name"] == entry["name"]:
                raise LogProcessorConfigError(
                    f"{where}: log_name: custom_cfg[{other['index']}] already produces {entry['name']!r}; "
                    "choose another log_name"
                )
        if "log_name" in entry:
            for other in self.custom_cfg:
                if entry["name"] == f"{other['data_src']}_avg":
                    raise LogProcessorConfigError(
                        f"{where}: log_name {entry['name']!r} is the default name of {other['data_src']!r}; choose another"
                    )

    # ------------------------------------------------------------------------------------- monitor
    def prepare(self, monitor: TickMonitor) -> None:
        """Make ``monitor`` keep what the entries need (other tick windows, last-N rings, since-start sums).

        Idempotent; what it asks for survives ``monitor.state_dict()``/``load_state_dict()``, before or
        after which it may run. A window kept from a later call fills from then on.
        """
        for entry in self.custom_cfg:
            window = entry.get("window_size")
            if window == "global":
                monitor.keep(entry["data_src"], since_start=True)
            elif window is not None and window != monitor.window_size(entry["data_src"]):
                monitor.keep(entry["data_src"], window=window)
            elif "last_n" in entry:
                monitor.keep(entry["data_src"], last_n=entry["last_n"])

    def _stat(self, monitor: TickMonitor, entry: Mapping[str, Any], end: Optional[int]) -> WindowStat:
        key, window = entry["data_src"], entry.get("window_size")
        if window == "global":
            return monitor.window_stat(key, end, since_start=True)
        if window is not None:
            return monitor.window_stat(key, end, window=window)
        if "last_n" in entry:
            return monitor.window_stat(key, end, last_n=entry["last_n"])
        return monitor.window_stat(key, end)

    def window_stats(self, monitor: TickMonitor, keys: Sequence[str], end: Optional[int] = None) -> Dict[str, WindowStat]:
        """Output name -> partial aggregate for ``keys``, in display order (a key's default, then its additions).

        ``end`` is the last tick of the windows (see ``TickMonitor``); entries whose ``data_src`` is not
        in ``keys`` produce nothing. Call :meth:`prepare` first for entries that need kept windows.
        """
        out: Dict[str, WindowStat] = {}
        owner: Dict[str, str] = {}
        replacing = {e["data_src"]: e for e in self.custom_cfg if "log_name" not in e}
        for key in keys:
            chosen = [replacing[key]] if key in replacing else [None]
            chosen += [e for e in self.custom_cfg if e["data_src"] == key and "log_name" in e]
            for entry in chosen:
                name = f"{key}_avg" if entry is None else entry["name"]
                if name in out:
                    raise LogProcessorConfigError(
                        f"output name {name!r} is produced by both {owner[name]} and {key!r}; "
                        "rename one of them (custom_cfg log_name)"
                    )
                out[name] = monitor.window_stat(key, end) if entry is None else self._stat(monitor, entry, end)
                owner[name] = repr(key)
        return out

    def method_of(self, name: str) -> str:
        """The method an output name of :meth:`window_stats` uses (``mean`` for defaults)."""
        for entry in self.custom_cfg:
            if entry["name"] == name:
                return entry["method_name"]
        return "mean"

    def values(self, stats: Mapping[str, WindowStat]) -> Dict[str, Union[float, int, None]]:
        """Output name -> final number; None for an empty window (a writer skips it, the table shows '-').

        ``'<key>_nonfinite'`` (an int) follows a key's entries where its own window holds NaN/inf.
        """
        methods = {e["name"]: (e["method_name"], e["data_src"]) for e in self.custom_cfg}
        out: Dict[str, Union[float, int, None]] = {}
        pending: Dict[str, int] = {}
        previous_key: Optional[str] = None
        for name, stat in stats.items():
            method, key = methods.get(name, ("mean", name[: -len("_avg")] if name.endswith("_avg") else name))
            if previous_key is not None and key != previous_key and pending.get(previous_key):
                out[f"{previous_key}_nonfinite"] = pending.pop(previous_key)
            if name not in methods or "log_name" not in self._entry(name):
                pending[key] = stat.nonfinite  # the key's own (default or replacing) statistic
            out[name] = stat.statistic(method)
            previous_key = key
        if previous_key is not None and pending.get(previous_key):
            out[f"{previous_key}_nonfinite"] = pending[previous_key]
        return out

    def _entry(self, name: str) -> Mapping[str, Any]:
        return next(e for e in self.custom_cfg if e["name"] == name)
