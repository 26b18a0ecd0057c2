"""Checking config values against the schema: merging a user's dict over the defaults, checking a whole run
config or one component's section, and warning about per-key windows that no declared key uses."""

from __future__ import annotations

import copy
import difflib
from typing import Any, Dict, List, Mapping, Optional, Sequence

from rlearn.config.errors import ConfigError
from rlearn.config.keys import flatten, get_by_path, known_paths, set_by_path, unknown_key_error
from rlearn.config.schema import SCHEMA, SECTIONS, defaults
from rlearn.config.spec import Key

__all__ = ["merge_section", "validate_keys", "validate_config", "resolve_section", "undeclared_window_warnings",
           "is_plain"]


def is_plain(value: Any) -> bool:
    """True for plain Python literals (what a config file written back can hold)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, (str, int)) and is_plain(v) for k, v in value.items())
    return False


def merge_section(base: Mapping[str, Any], user: Mapping[str, Any], prefix: str = "",
                  known: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """``base`` (defaults) updated with ``user``, recursively for framework sections.

    A key of ``user`` that ``base`` lacks is a :class:`ConfigError` naming its full path (``prefix`` + key),
    the closest of ``known`` (default: every framework key) and any other unknown key of the same dict. The
    ``policy`` section and the free-form dicts (``env.kwargs``, ``learner.monitor_windows``) are taken whole.
    """
    known = known_paths(defaults()) if known is None else known
    merged = copy.deepcopy(dict(base))
    bad = [key for key in user if not isinstance(key, str)]
    if bad:
        raise ConfigError(f"config keys must be strings, got {bad[0]!r} in '{prefix[:-1] or 'the top level'}'")
    unknown = [f"{prefix}{key}" for key in user if key not in merged]
    if unknown:
        error = unknown_key_error(unknown[0], known)
        if len(unknown) > 1:
            error = ConfigError(f"{error}; also unknown: {', '.join(repr(p) for p in unknown[1:])}")
        raise error
    for key, value in user.items():
        path = f"{prefix}{key}"
        if isinstance(merged[key], dict) and path in SECTIONS and path != "policy":
            if not isinstance(value, Mapping):
                raise ConfigError(f"config key '{path}' is a section and must be a dict, got {value!r}")
            merged[key] = merge_section(merged[key], value, f"{path}.", known)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def validate_keys(cfg: Dict[str, Any], keys: Mapping[str, Key], prefix: str = "") -> None:
    """Check the value of every key of ``keys`` (dotted paths starting with ``prefix``, the section ``cfg``
    is) and normalise it in place (an int of a float key becomes a float, a tuple of a list key a list).
    Raises :class:`ConfigError` naming the full key, or the item (``policy.hidden_sizes[1]``)."""
    for path, key in keys.items():
        relative = path[len(prefix):]
        try:
            value = get_by_path(cfg, relative)
        except KeyError:
            raise ConfigError(f"config key '{path}' is missing") from None
        set_by_path(cfg, relative, key.validate(value))


def validate_config(cfg: Dict[str, Any]) -> None:
    """Check every framework key of a resolved config (:func:`validate_keys`) and that all values are plain
    Python literals (so the config can be dumped and read back)."""
    validate_keys(cfg, SCHEMA)
    for path, value in flatten(cfg, stop=()).items():
        if not is_plain(value):
            raise ConfigError(
                f"config key '{path}' must hold plain Python values (dict, list, str, number, bool, None), "
                f"got {type(value).__name__}"
            )


def resolve_section(section_path: str, cfg: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """One component's section (``"learner"``): ``cfg`` (a partial dict, or None) merged over the schema's
    defaults, every key checked, keys declared ``same_as`` a sibling filled from it when None. For components
    built from their section alone (``BaseLearner(policy, {"log_freq": 10})``)."""
    if section_path not in SECTIONS or section_path in ("", "policy"):
        raise KeyError(f"no framework section {section_path!r}")
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"config key '{section_path}' is a section and must be a dict, got {type(cfg).__name__} {cfg!r}")
    prefix = f"{section_path}."
    merged = merge_section(defaults(section_path), cfg, prefix)
    keys = {path: key for path, key in SCHEMA.items() if path.startswith(prefix)}
    validate_keys(merged, keys, prefix)
    for path, key in keys.items():
        if key.same_as:
            relative = path[len(prefix):]
            if get_by_path(merged, relative) is None:
                sibling = f"{relative.rpartition('.')[0]}.{key.same_as}".lstrip(".")
                set_by_path(merged, relative, get_by_path(merged, sibling))
    return merged


def undeclared_window_warnings(windows: Mapping[str, Any], declared: Sequence[str], owner: str) -> List[str]:
    """One warning per key of ``learner.monitor_windows`` that is not in ``declared`` (the monitor keys the
    policy ``owner`` and the run declare): its window would never be used, most often a typo."""
    declared = list(declared)
    messages: List[str] = []
    for key in windows:
        if key in declared:
            continue
        close = difflib.get_close_matches(str(key), declared, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        messages.append(
            f"config key 'learner.monitor_windows.{key}': no monitor key {key!r} is declared, so this window is "
            f"never used; {hint}declared keys ({owner}): {', '.join(declared) or 'none'}"
        )
    return messages
