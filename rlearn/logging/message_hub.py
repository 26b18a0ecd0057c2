"""``MessageHub``: named hubs where components publish scalars (as ``HistoryBuffer``) and runtime info."""

from __future__ import annotations

import copy
import difflib
import threading
import warnings
from collections import OrderedDict
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Tuple

from rlearn.logging.history_buffer import HistoryBuffer, _check_count, _check_value

__all__ = ["MessageHub"]

_STATE_VERSION = 1


class MessageHub:
    """A bus shared by the components of a run: scalar histories plus free-form runtime information.

    Scalars (losses, times, learning rates...) are kept per key in a :class:`HistoryBuffer`; by
    convention keys carry a ``train/``, ``val/`` or ``test/`` prefix, which :class:`LogProcessor` uses to
    select them. Runtime information (``iter``, ``envstep``, the config...) is a dict whose values are
    replaced on each update.

    Get a shared hub with :meth:`get_instance` (create-or-return by name) or
    :meth:`get_current_instance` (the most recently created one). Constructing ``MessageHub(name)``
    directly gives a private hub that the class-level lookups do not know about.

    Args:
        name: the hub's name.
        max_length: ``max_length`` of every scalar's :class:`HistoryBuffer`.
        max_state_length: how many recent values per key :meth:`state_dict` keeps, so checkpoints stay
            small however long the run is.
    """

    _instances: "OrderedDict[str, MessageHub]" = OrderedDict()
    _lock = threading.RLock()
    DEFAULT_NAME = "rlearn"

    def __init__(self, name: str, max_length: int = 1_000_000, max_state_length: int = 1000) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"MessageHub name must be a non-empty str; got {name!r}")
        for arg, val in (("max_length", max_length), ("max_state_length", max_state_length)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"MessageHub {arg} must be a positive int; got {val!r}")
        self.instance_name = name
        self.max_length = max_length
        self.max_state_length = max_state_length
        self._log_scalars: Dict[str, HistoryBuffer] = OrderedDict()
        self._runtime_info: Dict[str, Any] = OrderedDict()

    def __repr__(self) -> str:
        return f"MessageHub(name={self.instance_name!r}, scalars={len(self._log_scalars)}, info={len(self._runtime_info)})"

    # ------------------------------------------------------------------ instances
    @classmethod
    def get_instance(cls, name: str, **kwargs: Any) -> "MessageHub":
        """Return the hub called ``name``, creating it (with ``kwargs``) if it does not exist yet.

        ``kwargs`` (``max_length``, ``max_state_length``) only apply on creation; passing different
        values for an existing hub raises ``ValueError`` rather than being silently ignored.
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

    # ------------------------------------------------------------------ scalars
    def update_scalar(self, key: str, value: Any, count: Any = 1) -> None:
        """Append ``value`` (standing for ``count`` samples) to the history of ``key``.

        A bad key, value or count raises (naming the key) and records nothing.
        """
        _check_key(key)
        buffer = self._log_scalars.get(key)
        try:
            if buffer is not None:
                buffer.update(value, count)
                return
            v, c = _check_value(value), _check_count(count)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"scalar {key!r}: {exc}") from None
        buffer = HistoryBuffer(max_length=self.max_length)
        buffer.update(v, c)
        self._log_scalars[key] = buffer

    def update_scalars(self, log_dict: Mapping[str, Any]) -> None:
        """Update several scalars at once: ``{key: value}`` or ``{key: {'value': v, 'count': c}}``.

        The whole mapping is validated before anything is recorded, so a bad entry (its key is named in
        the error) leaves every history unchanged.
        """
        if not isinstance(log_dict, Mapping):
            raise TypeError(f"update_scalars expects a mapping; got {type(log_dict).__name__}")
        checked: List[Tuple[str, float, float]] = []
        for key, item in log_dict.items():
            _check_key(key)
            try:
                if isinstance(item, Mapping):
                    unknown = set(item) - {"value", "count"}
                    if "value" not in item or unknown:
                        raise ValueError(
                            "a dict entry must have a 'value' and optionally a 'count'"
                            + (f"; unexpected keys {sorted(map(str, unknown))}" if unknown else "")
                        )
                    checked.append((key, _check_value(item["value"]), _check_count(item.get("count", 1))))
                else:
                    checked.append((key, _check_value(item), 1.0))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"scalar {key!r}: {exc}") from None
        for key, value, count in checked:
            buffer = self._log_scalars.get(key)
            if buffer is None:
                buffer = self._log_scalars[key] = HistoryBuffer(max_length=self.max_length)
            buffer._append(value, count)

    def get_scalar(self, key: str) -> HistoryBuffer:
        """The :class:`HistoryBuffer` of ``key``; ``KeyError`` lists the known keys."""
        try:
            return self._log_scalars[key]
        except KeyError:
            raise _missing(key, "scalar", self._log_scalars, self.instance_name) from None

    @property
    def log_scalars(self) -> Mapping[str, HistoryBuffer]:
        """Read-only view ``{key: HistoryBuffer}`` of every scalar, in first-update order."""
        return MappingProxyType(self._log_scalars)

    # ------------------------------------------------------------------ runtime info
    def update_info(self, key: str, value: Any) -> None:
        """Set runtime information ``key`` to ``value`` (replacing the previous value)."""
        _check_key(key)
        self._runtime_info[key] = value

    def get_info(self, key: str, default: Any = None) -> Any:
        """Runtime information ``key``, or ``default`` if it was never set."""
        return self._runtime_info.get(key, default)

    @property
    def runtime_info(self) -> Mapping[str, Any]:
        """Read-only view of the runtime information."""
        return MappingProxyType(self._runtime_info)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> Dict[str, Any]:
        """A picklable snapshot: the last ``max_state_length`` values of each scalar and the runtime info.

        Only plain Python containers and numbers are used for the scalars, so the result can be saved
        with ``torch.save`` and loaded with ``weights_only=True``. Runtime info that cannot be deep-copied
        is left out with a warning.
        """
        info: Dict[str, Any] = {}
        for key, value in self._runtime_info.items():
            try:
                info[key] = copy.deepcopy(value)
            except Exception as exc:  # noqa: BLE001 - anything deepcopy refuses is skipped, not fatal
                warnings.warn(f"MessageHub {self.instance_name!r}: runtime info {key!r} is not saved ({exc})")
        return {
            "version": _STATE_VERSION,
            "log_scalars": {k: b.state_dict(last=self.max_state_length) for k, b in self._log_scalars.items()},
            "runtime_info": info,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore scalars and runtime info from :meth:`state_dict`.

        Keys in ``state`` replace the hub's ones of the same name; other keys are kept. The whole state is
        checked first: a malformed one raises (naming the culprit) and changes nothing. Restored buffers
        get this hub's ``max_length``.
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"MessageHub state must be a mapping; got {type(state).__name__}")
        missing = [k for k in ("log_scalars", "runtime_info") if k not in state]
        if missing:
            raise KeyError(f"MessageHub state is missing {', '.join(missing)}")
        if state.get("version", _STATE_VERSION) != _STATE_VERSION:
            raise ValueError(f"MessageHub state version {state.get('version')!r} is not supported")
        scalars, info = state["log_scalars"], state["runtime_info"]
        if not isinstance(scalars, Mapping) or not isinstance(info, Mapping):
            raise TypeError("MessageHub state: 'log_scalars' and 'runtime_info' must be mappings")
        restored: Dict[str, HistoryBuffer] = {}
        for key, buf_state in scalars.items():
            _check_key(key)
            try:
                if not isinstance(buf_state, Mapping):
                    raise TypeError(f"expected a mapping, got {type(buf_state).__name__}")
                restored[key] = HistoryBuffer.from_state_dict(
                    {**buf_state, "max_length": self.max_length}
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise type(exc)(f"MessageHub state: scalar {key!r}: {exc}") from None
        for key in info:
            _check_key(key)
        self._log_scalars.update(restored)
        self._runtime_info.update(copy.deepcopy(dict(info)))


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
