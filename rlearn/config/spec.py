"""How a config key is declared (:func:`option`, :func:`section`) and checked (:class:`Key`)."""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional

from rlearn.config.errors import ConfigError
from rlearn.values import is_int, is_real

__all__ = ["Key", "option", "section", "one_of", "non_empty", "is_int", "is_real"]

Check = Callable[[Any], Optional[str]]  # returns a complaint ("must be ..."), or None when the value is fine


def one_of(*choices: Any) -> Check:
    """A ``check`` accepting exactly ``choices`` (``option("fp32", ..., check=one_of("fp32", "bf16"))``)."""
    def check(value: Any) -> Optional[str]:
        return None if value in choices else f"must be one of {', '.join(map(repr, choices))}"
    return check


def non_empty(value: Any) -> Optional[str]:
    """A ``check`` refusing an empty list, dict or string."""
    return None if len(value) else "must not be empty"


def option(default: Any, help: str, *, ge: Optional[float] = None, gt: Optional[float] = None,
           le: Optional[float] = None, finite: bool = False, check: Optional[Check] = None, expected: str = "",
           doc_default: str = "", same_as: str = "", items: Optional[Dict[str, Any]] = None) -> Any:
    """Declare one config key of a section dataclass: its ``default`` (copied for each config) and ``help`` (the
    docs table's "meaning"). ``ge``/``gt``/``le``: bounds of a number, ``finite``: no inf/nan; ``check``: an extra
    check returning a complaint or None; ``expected``: how errors describe an accepted value; ``doc_default``: how
    the docs show the default; ``same_as``: for a None default, the sibling key it takes its value from
    (``learner.monitor_window`` is ``log_freq`` unless set); ``items``: the bounds of a list's items or a dict's
    values (``dict(ge=1)``), errors naming the item (``learner.monitor_windows.loss``)."""
    meta = dict(help=help, ge=ge, gt=gt, le=le, finite=finite, check=check, expected=expected,
                doc_default=doc_default, same_as=same_as, items=items or {})
    return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=meta)


def section(cls: type) -> Any:
    """Declare a nested section (a dataclass of options) inside a section."""
    return dataclasses.field(default_factory=cls, metadata={"section": cls})


@dataclass(frozen=True)
class Key:
    """One framework key: its dotted path, type, default and limits (built from an :func:`option`)."""

    path: str
    kind: type  # int, float, bool, str, list or dict
    nullable: bool
    default: Any
    help: str
    ge: Optional[float] = None
    gt: Optional[float] = None
    finite: bool = False
    le: Optional[float] = None
    check: Optional[Check] = None
    expected: str = ""
    doc_default: str = ""
    same_as: str = ""
    item_kind: Optional[type] = None  # type of list items / dict values, when declared
    items: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def required(self) -> bool:
        """No default and None not allowed: the user must set it."""
        return self.default is None and not self.nullable and not self.same_as

    def describe(self) -> str:
        """What the key accepts, for messages: ``int >= 1 or None``."""
        text = self.expected or _describe(self.kind, self.ge, self.gt, self.le)
        if not self.expected and self.item_kind not in (None, object):
            item = _describe(self.item_kind, self.items.get("ge"), self.items.get("gt"))
            text = f"dict of str -> {item}" if self.kind is dict else f"list of {item}"
        if self.finite and not self.expected and self.gt is None:
            text = f"finite {text}"
        return f"{text} or None" if self.nullable else text

    def validate(self, value: Any) -> Any:
        """Check ``value`` and return it normalised (an int given for a float key becomes a float, a tuple
        for a list key a list). Raises :class:`ConfigError` naming the key, or the item for list/dict keys."""
        if value is None:
            if self.nullable or self.same_as:
                return None
            raise ConfigError(f"config key '{self.path}' must be {self.describe()}, got None")
        value = _checked(self.path, value, self.kind, self.describe(), self.ge, self.gt, self.le, self.finite,
                         self.check)
        bad = [name for name in value if not isinstance(name, str)] if isinstance(value, dict) else []
        if bad:
            raise ConfigError(f"config key '{self.path}' must have string keys, got {bad[0]!r}")
        if self.item_kind is not None:
            ge, gt = self.items.get("ge"), self.items.get("gt")
            text = _describe(self.item_kind, ge, gt)
            for name, item in value.items() if isinstance(value, dict) else enumerate(value):
                where = f"{self.path}.{name}" if isinstance(value, dict) else f"{self.path}[{name}]"
                _checked(where, item, self.item_kind, text, ge, gt)
        return value


def _checked(path: str, value: Any, kind: type, expected: str, ge: Optional[float] = None,
             gt: Optional[float] = None, le: Optional[float] = None, finite: bool = False,
             check: Optional[Check] = None) -> Any:
    """``value`` normalised to ``kind`` after the type, range and ``check``; else a ConfigError naming ``path``."""
    if not has_kind(value, kind):
        raise ConfigError(f"config key '{path}' must be {expected}, got {type(value).__name__} {value!r}")
    value = _normalise(value, kind)
    complaint = _range_complaint(value, ge, gt, finite, le) if kind in (int, float) else None
    if complaint is None and check is not None:
        complaint = check(value)
    if complaint:
        shown = "" if isinstance(value, (list, dict)) else f", got {value!r}"
        raise ConfigError(f"config key '{path}' {complaint}{shown}")
    return value


def _interval(ge: Optional[float], gt: Optional[float], le: float) -> str:
    return f"[{ge}, {le}]" if gt is None else f"({gt}, {le}]"


def _describe(kind: type, ge: Optional[float], gt: Optional[float], le: Optional[float] = None) -> str:
    if le is not None and (ge is not None or gt is not None):
        return f"{kind.__name__} in {_interval(ge, gt, le)}"
    bounds = [f" {op} {bound}" for op, bound in (("<=", le), (">=", ge), (">", gt)) if bound is not None]
    return kind.__name__ + "".join(bounds)


def has_kind(value: Any, kind: type) -> bool:
    """Whether ``value`` is of config type ``kind`` (a bool is no int, an int is a float, a tuple a list)."""
    if kind is int:
        return is_int(value)
    if kind is float:
        return is_real(value)
    if kind is list:
        return isinstance(value, (list, tuple))
    if kind is dict:
        return isinstance(value, Mapping)
    return isinstance(value, kind)


def _normalise(value: Any, kind: type) -> Any:
    if kind is float and is_int(value):
        return float(value)
    if kind is int:
        return int(value)
    if kind is list and isinstance(value, tuple):
        return list(value)
    if kind is dict and not isinstance(value, dict):
        return dict(value)
    return value


def _range_complaint(value: Any, ge: Optional[float], gt: Optional[float], finite: bool,
                     le: Optional[float] = None) -> Optional[str]:
    if le is not None and (ge is not None or gt is not None) and not (
            value <= le and (value >= ge if gt is None else value > gt)):
        return f"must be in {_interval(ge, gt, le)}"
    if finite and not math.isfinite(value):
        return f"must be a finite number > {gt}" if gt is not None else "must be finite"
    if ge is not None and not value >= ge:
        return f"must be >= {ge}"
    if gt is not None and not value > gt:
        return f"must be a finite number > {gt}" if finite else f"must be > {gt}"
    if le is not None and not value <= le:
        return f"must be <= {le}"
    return None
