"""``MessageHub``: named hubs where components publish runtime state (iteration, env steps, lr, last evaluation)."""

from __future__ import annotations

import copy
import difflib
import threading
import warnings
from collections import OrderedDict
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Set


__all__ = ["MessageHub"]

_STATE_VERSION = 2
_MISSING = object()


class MessageHub:
    """The bus where the components of a run publish runtime state for hooks to read.

    Runtime information (``train_iter``, ``envstep``, learning rates, the last evaluation...) is a dict
    whose values are replaced on each update. Monitored numbers do not go here: they go through
    :class:`~rlearn.monitor.TickMonitor` (see docs/monitoring.md). Keys set with ``resumed=True`` (the
    default) are saved by :meth:`state_dict` and survive a resume; ``resumed=False`` keys do not.

    Get a shared hub with :meth:`get_instance` (create-or-return by name) or
    :meth:`get_current_instance` (the most recently created one). Constructing ``MessageHub(name)``
    directly gives a private hub that the class-level lookups do not know about.

    Args:
        name: the hub's name.
    """

    _instances: "OrderedDict[str, MessageHub]" = OrderedDict()
    _lock = threading.RLock()
    DEFAULT_NAME = "rlearn"

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"MessageHub name must be a non-empty str; got {name!r}")
        self.instance_name = name
        self._runtime_info: Dict[str, Any] = OrderedDict()
        self._resumed_keys: Set[str] = set()

    def __repr__(self) -> str:
        return f"MessageHub(name={self.instance_name!r}, info={len(self._runtime_info)})"

    # ------------------------------------------------------------------ instances
    @classmethod
    def get_instance(cls, name: str, **kwargs: Any) -> "MessageHub":
        """Return the hub called ``name``, creating it (with ``kwargs``) if it does not exist yet.

        ``kwargs`` (constructor arguments) only apply on creation; passing different values for an
        existing hub raises ``ValueError`` rather than being silently ignored.
        """
        with cls._lock:
            hub = cls._instances.get(name)
            if hub is None:
                hub = cls(name, **kwargs)
                cls._instances[name] = hub
            else:
                differing = {k: v for k, v in kwargs.items() if getattr(hub, k, object()) != v}
                if differing:
                    raise ValueError(
                        f"MessageHub {name!r} already exists with "
                        + ", ".join(f"{k}={getattr(hub, k, None)!r}" for k in differing)
                        + f"; cannot change it to {differing}"
                    )
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

    # ------------------------------------------------------------------ runtime info
    def update_info(self, key: str, value: Any, resumed: bool = True) -> None:
        """Set runtime information ``key`` to ``value`` (replacing the previous value).

        ``resumed=True`` (default): the key is saved by :meth:`state_dict` and restored on resume;
        ``resumed=False``: it lives for this process only (handles, per-run objects).
        """
        _check_key(key)
        self._runtime_info[key] = value
        if resumed:
            self._resumed_keys.add(key)
        else:
            self._resumed_keys.discard(key)

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
        return self._runtime_info.get(key, default)

    def pop_info(self, key: str, default: Any = _MISSING) -> Any:
        """Remove runtime information ``key`` and return its value.

        A missing key returns ``default`` when given, else raises ``KeyError`` listing the known keys.
        """
        if key in self._runtime_info:
            self._resumed_keys.discard(key)
            return self._runtime_info.pop(key)
        if default is not _MISSING:
            return default
        raise _missing(key, "info", self._runtime_info, self.instance_name)

    @property
    def runtime_info(self) -> Mapping[str, Any]:
        """Read-only view of the runtime information."""
        return MappingProxyType(self._runtime_info)

    @property
    def resumed_keys(self) -> List[str]:
        """The runtime-info keys that :meth:`state_dict` saves, in insertion order."""
        return [k for k in self._runtime_info if k in self._resumed_keys]

    # ------------------------------------------------------------------ state
    def state_dict(self) -> Dict[str, Any]:
        """A picklable snapshot of the runtime info whose keys were set with ``resumed=True``.

        Those are the keys that survive a resume (the learner's ``train_iter``, ``envstep``, the last
        evaluation...); keys set with ``resumed=False`` are left out. A value that cannot be deep-copied
        is left out with a warning.
        """
        info: Dict[str, Any] = {}
        for key in self.resumed_keys:
            try:
                info[key] = copy.deepcopy(self._runtime_info[key])
            except Exception as exc:  # noqa: BLE001 - anything deepcopy refuses is skipped, not fatal
                warnings.warn(f"MessageHub {self.instance_name!r}: runtime info {key!r} is not saved ({exc})")
        return {"version": _STATE_VERSION, "runtime_info": info}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the runtime info of :meth:`state_dict` (as resumed keys; other keys are kept).

        The whole state is checked first: a malformed one raises (naming the culprit) and changes nothing.
        A version-1 state (which also held scalar histories) is accepted; its scalars are ignored.
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"MessageHub state must be a mapping; got {type(state).__name__}")
        if "runtime_info" not in state:
            raise KeyError("MessageHub state is missing runtime_info")
        if state.get("version", _STATE_VERSION) not in (1, _STATE_VERSION):
            raise ValueError(f"MessageHub state version {state.get('version')!r} is not supported")
        info = state["runtime_info"]
        if not isinstance(info, Mapping):
            raise TypeError("MessageHub state: 'runtime_info' must be a mapping")
        for key in info:
            _check_key(key)
        self._runtime_info.update(copy.deepcopy(dict(info)))
        self._resumed_keys.update(info)


def _check_key(key: Any) -> None:
    if not isinstance(key, str) or not key:
        raise TypeError(f"key must be a non-empty str; got {key!r}")


def _missing(key: Any, what: str, known: Mapping[str, Any], hub: str) -> KeyError:
    close = difflib.get_close_matches(str(key), list(known), n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    names = ", ".join(map(repr, known)) if known else "none"
    return _KeyError(f"MessageHub {hub!r} has no {what} {key!r}.{hint} Known {what}s: {names}")


class _KeyError(KeyError):
    def __str__(self) -> str:  # show the message, not its repr
        return str(self.args[0]) if self.args else ""
