"""``MessageHub``: MMEngine's named hubs of scalars and runtime info; in a run, the way into the run's
:class:`~rlearn.monitor.TickMonitor` (docs/logging.md)."""

from __future__ import annotations

import copy
import difflib
import threading
import warnings
from collections import OrderedDict
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from rlearn.monitor import HistoryBuffer
from rlearn.monitor.history_buffer import check_count, check_value
from rlearn.monitor.scalars import check_key

__all__ = ["MessageHub"]

_MISSING = object()


class MessageHub:
    """Where the components of a run publish scalars and runtime info. Attached to a run (:meth:`attach`)
    its scalars go into the run's monitor at the current train iteration; detached it keeps a
    :class:`~rlearn.monitor.HistoryBuffer` per key. It may start from ``log_scalars`` (``{key: HistoryBuffer}``),
    ``runtime_info`` and ``resumed_keys`` (``{key: bool}``: saved by :meth:`state_dict`). :meth:`get_instance`
    and :meth:`get_current_instance` give shared hubs, ``MessageHub(name)`` a private one."""

    _instance_dict: "OrderedDict[str, MessageHub]" = OrderedDict()
    _lock = threading.RLock()

    def __init__(self, name: str, log_scalars: Optional[Mapping[str, HistoryBuffer]] = None,
                 runtime_info: Optional[Mapping[str, Any]] = None,
                 resumed_keys: Optional[Mapping[str, bool]] = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"MessageHub name must be a non-empty str; got {name!r}")
        given = {"log_scalars": log_scalars, "runtime_info": runtime_info, "resumed_keys": resumed_keys}
        for what, value in given.items():
            if not isinstance(value, (Mapping, type(None))):
                raise TypeError(f"MessageHub {what} must be a dict; got {type(value).__name__}")
        self.instance_name = name
        self._log_scalars: Dict[str, HistoryBuffer] = OrderedDict(log_scalars or {})
        self._runtime_info: Dict[str, Any] = OrderedDict(runtime_info or {})
        self._resumed_keys: Dict[str, bool] = OrderedDict(resumed_keys or {})
        for key, buffer in self._log_scalars.items():
            if not isinstance(buffer, HistoryBuffer):
                raise TypeError(f"MessageHub log_scalars[{key!r}] must be a HistoryBuffer; got {type(buffer).__name__}")
        for key in self._resumed_keys:
            if key not in self._log_scalars and key not in self._runtime_info:
                raise KeyError(f"MessageHub resumed_keys names {key!r}, neither in log_scalars nor in runtime_info")
        self._monitor: Any = None  # the run's TickMonitor once attached
        self._record: Optional[Callable[[Mapping[str, Any]], None]] = None
        self._live: Dict[str, Tuple[Callable[[], Any], bool]] = {}

    def __repr__(self) -> str:
        scalars = len(self._log_scalars) if self._monitor is None else len(self._monitor.keys())
        return f"MessageHub(name={self.instance_name!r}, scalars={scalars}, info={len(self.runtime_info)})"

    def attach(self, monitor: Any, record: Optional[Callable[[Mapping[str, Any]], None]] = None,
               live_info: Optional[Mapping[str, Tuple[Callable[[], Any], bool]]] = None) -> None:
        """Make this hub the way into ``monitor``: ``record(info)`` records at its current tick (default
        ``monitor.update``), ``live_info`` maps info keys to ``(getter, resumed)``; held scalars move into it."""
        self._monitor, self._record = monitor, record if record is not None else monitor.update
        self._live = dict(live_info or {})
        held, self._log_scalars = self._log_scalars, OrderedDict()
        for key, buffer in held.items():
            for value, count in zip(*buffer.data):
                self.update_scalar(key, value, count)

    @classmethod
    def get_instance(cls, name: str, **kwargs: Any) -> "MessageHub":
        """The hub called ``name``, created if new or if ``kwargs`` (those of :class:`MessageHub`) are given."""
        with cls._lock:
            if kwargs or name not in cls._instance_dict:
                cls._instance_dict[name] = cls(name, **kwargs)
            return cls._instance_dict[name]

    @classmethod
    def get_current_instance(cls) -> "MessageHub":
        """The most recently created hub; a hub named ``'rlearn'`` is created if there is none."""
        with cls._lock:
            return cls.get_instance(next(reversed(cls._instance_dict), "rlearn"))

    @classmethod
    def check_instance_created(cls, name: str) -> bool:
        """Whether a shared hub called ``name`` exists."""
        return name in cls._instance_dict

    def update_scalar(self, key: str, value: Any, count: Any = 1, resumed: bool = True) -> None:
        """Record the scalar ``value`` under ``key``: in a run into the monitor at the current train iteration
        (``count`` must be 1), outside into the hub's buffer (``resumed``: saved by :meth:`state_dict`)."""
        self.update_scalars({key: {"value": value, "count": count}}, resumed)

    def update_scalars(self, log_dict: Mapping[str, Any], resumed: bool = True) -> None:
        """:meth:`update_scalar` for every item (a value or ``dict(value=..., count=...)``), all checked first:
        a bad value raises naming its key and records nothing."""
        if not isinstance(log_dict, Mapping):
            raise TypeError(f"update_scalars expects a dict key -> value; got {type(log_dict).__name__}")
        items = []
        for key, item in log_dict.items():
            check_key(key)
            if not isinstance(item, Mapping):
                item = {"value": item}
            elif "value" not in item or not set(item) <= {"value", "count"}:
                raise TypeError(f"update_scalars: {key!r} must be a scalar or dict(value=..., count=...); got {item!r}")
            count = check_count(item.get("count", 1), f"count of {key!r}")
            if count != 1.0 and self._record is not None:
                raise ValueError(f"update_scalar({key!r}, count={item['count']!r}): in a run every recorded value "
                                 "counts once (windows average the values of their train iterations); record the "
                                 "per-sample value with count=1")
            # in a run the monitor checks and converts the values (one host copy per device for tensors)
            items.append((key, item["value"] if self._record is not None else check_value(item["value"], key), count))
        if self._record is not None:
            self._record({key: value for key, value, _ in items})  # one tick update: all-or-nothing
            return
        for key, value, count in items:
            if key not in self._log_scalars:
                self._log_scalars[key] = HistoryBuffer()
            self._log_scalars[key].update(value, count)
            self._resumed_keys[key] = bool(resumed)

    def get_scalar(self, key: str) -> HistoryBuffer:
        """The history of ``key``: in a run a ``HistoryBuffer`` of its window's finite values, else the hub's own."""
        if self._monitor is None and key in self._log_scalars:
            return self._log_scalars[key]
        if self._monitor is None or key not in self._monitor:
            raise _missing(key, "scalar", self._log_scalars if self._monitor is None else self._monitor.keys(), self)
        values = self._monitor.window_values(key)
        return HistoryBuffer(values, max_length=max(1, len(values)))

    @property
    def log_scalars(self) -> Dict[str, HistoryBuffer]:
        """Every scalar key mapped to its history (:meth:`get_scalar`), in first-seen order."""
        keys = self._log_scalars if self._monitor is None else self._monitor.keys()
        return OrderedDict((key, self.get_scalar(key)) for key in keys)

    def update_info(self, key: str, value: Any, resumed: bool = True) -> None:
        """Set runtime information ``key`` to ``value``; ``resumed=False``: not saved by :meth:`state_dict`."""
        self.update_info_dict({key: value}, resumed)

    def update_info_dict(self, info_dict: Mapping[str, Any], resumed: bool = True) -> None:
        """:meth:`update_info` for every item of ``info_dict`` (all keys are checked first)."""
        if not isinstance(info_dict, Mapping):
            raise TypeError(f"update_info_dict expects a mapping; got {type(info_dict).__name__}")
        for key in info_dict:
            check_key(key)
        self._runtime_info.update(info_dict)
        self._resumed_keys.update(dict.fromkeys(info_dict, bool(resumed)))

    def get_info(self, key: str, default: Any = None) -> Any:
        """Runtime information ``key``, or ``default`` if it was never set."""
        return self._live[key][0]() if key in self._live else self._runtime_info.get(key, default)

    def pop_info(self, key: str, default: Any = _MISSING) -> Any:
        """Remove runtime information ``key`` and return its value (``default``, or ``KeyError``, if missing)."""
        if key in self._runtime_info:
            self._resumed_keys.pop(key, None)
            return self._runtime_info.pop(key)
        if default is _MISSING:
            raise _missing(key, "info", self._runtime_info, self)
        return default

    @property
    def runtime_info(self) -> Mapping[str, Any]:
        """Read-only view of the runtime information (the run's live keys read now)."""
        if not self._live:
            return MappingProxyType(self._runtime_info)
        return MappingProxyType({**self._runtime_info, **{k: get() for k, (get, _) in self._live.items()}})

    @property
    def resumed_keys(self) -> List[str]:
        """The runtime-info keys that :meth:`state_dict` saves, in insertion order."""
        live = [k for k, (_, resumed) in self._live.items() if resumed]
        return [k for k in self._runtime_info if self._resumed_keys.get(k) and k not in self._live] + live

    def state_dict(self) -> Dict[str, Any]:
        """MMEngine's state: copies of the scalars and runtime info set with ``resumed=True`` (a value deepcopy
        refuses is left out, with a warning), and their ``resumed_keys``."""
        info: Dict[str, Any] = {}
        for key in self.resumed_keys:
            try:
                info[key] = copy.deepcopy(self.get_info(key))
            except Exception as exc:  # noqa: BLE001 - anything deepcopy refuses is skipped, not fatal
                warnings.warn(f"MessageHub {self.instance_name!r}: runtime info {key!r} is not saved ({exc!r})")
        scalars = {k: copy.deepcopy(b) for k, b in self._log_scalars.items() if self._resumed_keys.get(k)}
        return {"log_scalars": scalars, "runtime_info": info, "resumed_keys": dict.fromkeys([*scalars, *info], True)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (a scalar may be a ``HistoryBuffer.state_dict()``; in a run the monitor
        restores the scalars), keeping other keys; all checked first: a bad state changes nothing."""
        if not isinstance(state, Mapping):
            raise TypeError(f"MessageHub state must be a mapping; got {type(state).__name__}")
        missing = [key for key in ("log_scalars", "runtime_info") if key not in state]
        if missing:
            raise KeyError(f"MessageHub state is missing {', '.join(missing)}")
        info, scalars = state["runtime_info"], state["log_scalars"]
        if not all(isinstance(part, Mapping) for part in (info, scalars, state.get("resumed_keys", {}))):
            raise TypeError("MessageHub state: 'runtime_info', 'log_scalars' and 'resumed_keys' must be mappings")
        resumed = state.get("resumed_keys", dict.fromkeys([*scalars, *info], True))
        buffers = {check_key(key): copy.deepcopy(saved) if isinstance(saved, HistoryBuffer)
                   else HistoryBuffer.from_state_dict(saved) for key, saved in scalars.items()}
        info = {check_key(key): _copy(value) for key, value in info.items()}
        self._runtime_info.update(info)
        if self._record is None:
            self._log_scalars.update(buffers)
        for key, flag in resumed.items():
            if key in self._runtime_info or key in self._log_scalars:
                self._resumed_keys[key] = bool(flag)


def _copy(value: Any) -> Any:
    try:  # a value that cannot be copied (a lock, a handle) is shared, as MMEngine does
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - anything deepcopy refuses is shared instead
        return value


def _missing(key: Any, what: str, known: Any, hub: MessageHub) -> KeyError:
    close = difflib.get_close_matches(str(key), list(known), n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    names = ", ".join(map(repr, known)) or "none"
    return KeyError(f"MessageHub {hub.instance_name!r} has no {what} {key!r}.{hint} Known {what}s: {names}")
