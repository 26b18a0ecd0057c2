"""``--set KEY=VALUE``: reading the text as the key's type (from the schema) and applying it to a config."""

from __future__ import annotations

import ast
import contextlib
import copy
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

from rlearn.config.errors import ConfigError
from rlearn.config.keys import get_by_path, known_paths, unknown_key_error
from rlearn.config.schema import FREE_FORM, SCHEMA
from rlearn.config.spec import Key, has_kind, is_int, is_real

__all__ = ["coerce_value", "parse_override", "apply_overrides", "Override"]

#: one override: ``"dotted.key=VALUE"`` text, or a ``(key, value)`` pair used as it is
Override = Union[str, Tuple[str, Any]]

_BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def coerce_value(key: str, text: str, kind: Optional[type], nullable: bool = True) -> Any:
    """Turn the string ``text`` of ``--set key=text`` into a value of type ``kind`` (None: a Python literal if
    the text is one, else the text); ``none`` / ``null`` give None where ``nullable``. The accepted texts are
    listed in docs/configuration.md; a text that does not fit raises :class:`ConfigError` naming the key."""
    stripped = text.strip()
    if nullable and stripped.lower() in ("none", "null"):
        return None
    literal: Any
    try:
        literal = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        literal = _NOTHING
    if kind is bool and stripped.lower() in _BOOL_WORDS:
        return _BOOL_WORDS[stripped.lower()]
    if kind is int and (is_int(literal) or isinstance(literal, float) and literal.is_integer()):  # 1e5, not inf
        return int(literal)
    if kind is float:
        if is_real(literal):
            return float(literal)
        with contextlib.suppress(ValueError):
            return float(stripped)  # inf, nan, -inf
    if kind is str:
        return literal if isinstance(literal, str) else text
    if kind in (list, tuple) and isinstance(literal, (list, tuple)):
        return list(literal)
    if kind is dict and isinstance(literal, dict):
        return literal
    if kind not in _EXPECTED:  # untyped
        return text if literal is _NOTHING else literal
    raise ConfigError(f"--set {key}={text}: cannot read {text!r} as {_EXPECTED[kind]}")


_NOTHING = object()
_EXPECTED = {bool: "bool (true/false, yes/no, on/off, 1/0)", int: "int", float: "float",
             list: "list (e.g. [64, 64] or 64,64)", tuple: "list (e.g. [64, 64] or 64,64)",
             dict: "dict (e.g. {'key': 1})"}


def parse_override(item: str) -> Tuple[str, str]:
    """Split ``"a.b=VALUE"`` into ``("a.b", "VALUE")``; anything else is a :class:`ConfigError`."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"--set expects KEY=VALUE (e.g. train.max_env_steps=5000), got {item!r}")
    key, _, value = item.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set expects a dotted key before '=' (e.g. train.max_env_steps=5000), got {item!r}")
    return key, value


def _override_kind(path: str, current: Any, keys: Optional[Mapping[str, Key]] = None) -> Tuple[Optional[type], bool]:
    """The type ``--set path=TEXT`` reads TEXT as: the declared one (schema or ``keys``), the item type of a typed
    free-form dict (``learner.monitor_windows.<key>``), else that of the current value."""
    field = SCHEMA.get(path) or (keys or {}).get(path)
    if field is not None:
        return field.kind, field.nullable
    parent = SCHEMA.get(path.rpartition(".")[0])
    if parent is not None and parent.item_kind not in (None, object):
        return parent.item_kind, False
    if current is not None:
        for kind in (bool, int, float, list, str, dict):
            if has_kind(current, kind):
                return kind, False
    return None, True


def apply_overrides(cfg: Dict[str, Any], overrides: Iterable[Override],
                    keys: Optional[Mapping[str, Key]] = None) -> Dict[str, Any]:
    """Apply ``--set`` overrides to a resolved config in place and return it: ``"dotted.key=VALUE"`` (coerced to
    the key's type from the schema or ``keys``, a policy's) or ``(key, value)`` pairs. The key must exist, except
    in a free-form dict (``env.kwargs.<name>``)."""
    known = known_paths(cfg)
    for item in overrides:
        is_text = not isinstance(item, tuple)
        path, raw = parse_override(item) if is_text else item
        parent_path, _, leaf = path.rpartition(".")
        try:
            parent = get_by_path(cfg, parent_path) if parent_path else cfg
        except KeyError:
            parent = None
        if not isinstance(parent, dict) or (leaf not in parent and parent_path not in FREE_FORM):
            policy_type = cfg["policy"].get("type") if isinstance(cfg.get("policy"), dict) else None
            owner = f" for policy {policy_type!r}" if path.startswith("policy.") and policy_type is not None else ""
            raise unknown_key_error(path, known, owner)
        if isinstance(parent.get(leaf), dict) and parent[leaf] and path not in FREE_FORM:
            subkeys = ", ".join(f"{path}.{k}" for k in parent[leaf])
            raise ConfigError(f"--set {path}: '{path}' is a section; set its keys one by one ({subkeys})")
        if is_text:
            kind, nullable = _override_kind(path, parent.get(leaf), keys)
            value = coerce_value(path, raw, kind, nullable)
        else:
            value = copy.deepcopy(raw)
        parent[leaf] = value
    return cfg

