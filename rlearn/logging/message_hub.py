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
    """Where the components of a run publish scalars and runtime state.

    Args:
        name: the hub's name (:attr:`instance_name`).
        log_scalars: ``{key: HistoryBuffer}`` to start from.
        runtime_info: ``{key: value}`` to start from.
        resumed_keys: ``{key: bool}``: whether :meth:`state_dict` saves that scalar or info key (default True).

    *Scalars* (:meth:`update_scalar(s) <update_scalar>`, :meth:`get_scalar`, :attr:`log_scalars`): in a
    run (:meth:`attach`) they go into the run's monitor at the current train iteration, like a policy's
    keys; outside a run the hub keeps a :class:`~rlearn.monitor.HistoryBuffer` per key. *Runtime info*
    is a dict. :meth:`get_instance` and :meth:`get_current_instance` give shared hubs; ``MessageHub(name)``
    a private one.
    """

    _instances: "OrderedDict[str, MessageHub]" = OrderedDict()
    _lock = threading.RLock()
    DEFAULT_NAME = "rlearn"

    def __init__(self, name: str, log_scalars: Optional[Mapping[str, HistoryBuffer]] = None,
                 runtime_info: Optional[Mapping[str, Any]] = None, resumed_keys: Optional[Mapping[str, bool]] = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"MessageHub name must be a non-empty str; got {name!r}")
        self.instance_name = name
        self._log_scalars: Dict[str, HistoryBuffer] = OrderedDict(_mapping("log_scalars", log_scalars))
        self._runtime_info: Dict[str, Any] = OrderedDict(_mapping("runtime_info", runtime_info))
        self._resumed_keys: Dict[str, bool] = OrderedDict(_mapping("resumed_keys", resumed_keys))
        for key, buffer in self._log_scalars.items():
            if not isinstance(buffer, HistoryBuffer):
                raise TypeError(f"MessageHub log_scalars[{key!r}] must be a HistoryBuffer; got {type(buffer).__name__}")
        for key in self._resumed_keys:
            if key not in self._log_scalars and key not in self._runtime_info:
                raise KeyError(f"MessageHub resumed_keys names {key!r}, which is neither in log_scalars nor in runtime_info")
        self._monitor: Any = None  # the run's TickMonitor once attached
        self._record: Optional[Callable[[Mapping[str, Any]], None]] = None
        self._live: Dict[str, Tuple[Callable[[], Any], bool]] = {}

    def __repr__(self) -> str:
        scalars = len(self._log_scalars) if self._monitor is None else len(self._monitor.keys())
        return f"MessageHub(name={self.instance_name!r}, scalars={scalars}, info={len(self.runtime_info)})"

    def attach(self, monitor: Any, record: Optional[Callable[[Mapping[str, Any]], None]] = None,
               live_info: Optional[Mapping[str, Tuple[Callable[[], Any], bool]]] = None) -> None:
        """Make this hub the way into ``monitor`` (the learner calls it): ``record(info)`` records at the
        current tick (default ``monitor.update``), ``live_info`` maps runtime-info keys to ``(getter,
        resumed)``. Scalars the hub held move into the monitor."""
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
            hub = cls._instances.get(name)
            if hub is None or kwargs:
                hub = cls._instances[name] = cls(name, **kwargs)
            return hub

    @classmethod
    def get_current_instance(cls) -> "MessageHub":
        """The most recently created hub; a hub named ``'rlearn'`` is created if there is none."""
        with cls._lock:
            if not cls._instances:
                return cls.get_instance(cls.DEFAULT_NAME)
            return next(reversed(cls._instances.values()))

    @classmethod
    def check_instance_created(cls, name: str) -> bool:
        """Whether a shared hub called ``name`` exists."""
        return name in cls._instances

    def update_scalar(self, key: str, value: Any, count: Any = 1, resumed: bool = True) -> None:
        """Record the scalar ``value`` under ``key``: in a run, into the monitor at the current train
        iteration (``count`` must be 1); outside, into the hub's buffer (``resumed``: saved by
        :meth:`state_dict`). A bad value raises naming the key."""
        _check_key(key)
        if self._record is None:
            buffer = self._log_scalars.get(key)
            if buffer is None:
                buffer = self._log_scalars[key] = HistoryBuffer()
            buffer.update(value, count)
            self._resumed_keys[key] = bool(resumed)
            return
        if not (type(count) is int and count == 1) and check_count(count) != 1.0:
            raise _counts_once(key, count)
        self._record({key: value})

    def update_scalars(self, log_dict: Mapping[str, Any], resumed: bool = True) -> None:
        """:meth:`update_scalar` for every item (a value or ``dict(value=..., count=...)``), all checked first."""
        if not isinstance(log_dict, Mapping):
            raise TypeError(f"update_scalars expects a dict key -> value; got {type(log_dict).__name__}")
        items = []
        for key, item in log_dict.items():
            _check_key(key)
            if isinstance(item, Mapping):
                if "value" not in item or not set(item) <= {"value", "count"}:
                    raise TypeError(f"update_scalars: {key!r} must be a scalar or dict(value=..., count=...); got {item!r}")
                items.append((key, item["value"], item.get("count", 1)))
            else:
                items.append((key, item, 1))
        for key, value, count in items:  # the values are checked before anything is recorded
            check_value(value, f"value of {key!r}")
            if check_count(count, f"count of {key!r}") != 1.0 and self._record is not None:
                raise _counts_once(key, count)
        if self._record is not None:
            self._record({key: value for key, value, _ in items})  # one tick update: all-or-nothing
            return
        for key, value, count in items:
            self.update_scalar(key, value, count, resumed)

    def get_scalar(self, key: str) -> HistoryBuffer:
        """The history of ``key``: in a run a snapshot ``HistoryBuffer`` of its window's finite values,
        outside the hub's own buffer. An unknown key raises ``KeyError`` listing the known ones."""
        if self._monitor is None:
            if key not in self._log_scalars:
                raise _missing(key, "scalar", self._log_scalars, self.instance_name)
            return self._log_scalars[key]
        if key not in self._monitor:
            raise _missing(key, "scalar", dict.fromkeys(self._monitor.keys()), self.instance_name)
        values = self._monitor.window_values(key)
        return HistoryBuffer(values, max_length=max(1, len(values)))

    @property
    def log_scalars(self) -> Dict[str, HistoryBuffer]:
        """Every scalar key mapped to its history (:meth:`get_scalar`), in first-seen order."""
        if self._monitor is None:
            return OrderedDict(self._log_scalars)
        return OrderedDict((key, self.get_scalar(key)) for key in self._monitor.keys())

    def update_info(self, key: str, value: Any, resumed: bool = True) -> None:
        """Set runtime information ``key`` to ``value``; ``resumed=False``: not saved by :meth:`state_dict`."""
        _check_key(key)
        self._runtime_info[key] = value
        self._resumed_keys[key] = bool(resumed)

    def update_info_dict(self, info_dict: Mapping[str, Any], resumed: bool = True) -> None:
        """:meth:`update_info` for every item of ``info_dict`` (all keys are checked first)."""
        if not isinstance(info_dict, Mapping):
            raise TypeError(f"update_info_dict expects a mapping; got {type(info_dict).__name__}")
        for key in info_dict:
            _check_key(key)
        for key, value in info_dict.items():
            self.update_info(key, value, resumed=resumed)

    def get_info(self, key: str, default: Any = None) -> Any:
        """Runtime information ``key``, or ``default`` if it was never set."""
        if key in self._live:
            return self._live[key][0]()
        return self._runtime_info.get(key, default)

    def pop_info(self, key: str, default: Any = _MISSING) -> Any:
        """Remove runtime information ``key`` and return its value (``default``, or ``KeyError``, if missing)."""
        if key in self._runtime_info:
            self._resumed_keys.pop(key, None)
            return self._runtime_info.pop(key)
        if default is not _MISSING:
            return default
        raise _missing(key, "info", self._runtime_info, self.instance_name)

    @property
    def runtime_info(self) -> Mapping[str, Any]:
        """Read-only view of the runtime information (the run's live keys read now)."""
        if not self._live:
            return MappingProxyType(self._runtime_info)
        return MappingProxyType({**self._runtime_info.copy(), **{k: get() for k, (get, _) in self._live.items()}})

    @property
    def resumed_keys(self) -> List[str]:
        """The runtime-info keys that :meth:`state_dict` saves, in insertion order."""
        live = [k for k, (_, resumed) in self._live.items() if resumed]
        return [k for k in list(self._runtime_info) if self._resumed_keys.get(k) and k not in self._live] + live

    def state_dict(self) -> Dict[str, Any]:
        """``log_scalars`` (copies of the ``HistoryBuffer`` s), ``runtime_info`` and ``resumed_keys`` set with
        ``resumed=True``, as MMEngine's; a value deepcopy refuses is left out, with a warning."""
        info: Dict[str, Any] = {}
        for key in self.resumed_keys:
            try:
                info[key] = copy.deepcopy(self.get_info(key))
            except Exception as exc:  # noqa: BLE001 - anything deepcopy refuses is skipped, not fatal
                warnings.warn(f"MessageHub {self.instance_name!r}: runtime info {key!r} is not saved ({exc})")
        scalars = {k: copy.deepcopy(b) for k, b in list(self._log_scalars.items()) if self._resumed_keys.get(k)}
        return {"log_scalars": scalars, "runtime_info": info, "resumed_keys": dict.fromkeys([*scalars, *info], True)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (other keys are kept; a scalar may also be a ``HistoryBuffer.state_dict()``);
        all checked first, a bad state changes nothing."""
        if not isinstance(state, Mapping):
            raise TypeError(f"MessageHub state must be a mapping; got {type(state).__name__}")
        missing = [key for key in ("log_scalars", "runtime_info") if key not in state]
        if missing:
            raise KeyError(f"MessageHub state is missing {', '.join(missing)}")
        info, scalars = state["runtime_info"], state["log_scalars"]
        if not isinstance(info, Mapping) or not isinstance(scalars, Mapping):
            raise TypeError("MessageHub state: 'runtime_info' and 'log_scalars' must be mappings")
        buffers = {_check_key(key): b if isinstance(b, HistoryBuffer) else HistoryBuffer.from_state_dict(dict(b))
                   for key, b in scalars.items()}
        info = {_check_key(key): value for key, value in info.items()}
        self._runtime_info.update(copy.deepcopy(info))
        self._resumed_keys.update(dict.fromkeys(info, True))
        for key, buffer in buffers.items():
            if self._record is None:
                self._log_scalars[key] = copy.deepcopy(buffer)
                self._resumed_keys[key] = True


def _counts_once(key: str, count: Any) -> ValueError:
    return ValueError(f"update_scalar({key!r}, count={count!r}): in a run every recorded value counts once (windows "
                      "average the values of their train iterations); record the per-sample value with count=1")


def _mapping(name: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"MessageHub {name} must be a dict; got {type(value).__name__}")
    return value


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise TypeError(f"key must be a non-empty str; got {key!r}")
    return check_key(key)


def _missing(key: Any, what: str, known: Mapping[str, Any], hub: str) -> KeyError:
    close = difflib.get_close_matches(str(key), list(known), n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    names = ", ".join(map(repr, known)) if known else "none"
    return _KeyError(f"MessageHub {hub!r} has no {what} {key!r}.{hint} Known {what}s: {names}")


class _KeyError(KeyError):
    def __str__(self) -> str:  # show the message, not its repr
        return str(self.args[0]) if self.args else ""
