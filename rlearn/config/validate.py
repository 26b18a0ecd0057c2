"""Checking config values against the schema: a whole run config, or one component's section.

:func:`merge_section` merges a user's dict over a section's defaults (unknown keys are errors with "did you
mean" suggestions), :func:`validate_config` checks every framework key of a resolved config,
:func:`resolve_section` does both for a component that is given only its section (``BaseLearner(policy,
cfg)``), filling keys that default to a sibling (``learner.monitor_window`` -> ``log_freq``), and
:func:`undeclared_window_warnings` names the per-key windows that no declared monitor key uses.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any, Dict, List, Mapping, Optional, Sequence

from rlearn.config.errors import ConfigError
from rlearn.config.keys import flatten, get_by_path, known_paths, set_by_path, unknown_key_error
from rlearn.config.schema import SCHEMA, SECTIONS, defaults

__all__ = ["merge_section", "validate_config", "resolve_section", "undeclared_window_warnings", "is_plain"]


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


def validate_config(cfg: Dict[str, Any]) -> None:
    """Check every framework key of a resolved config against the schema (types, ranges, items) and that all
    values are plain Python literals (so the config can be dumped and read back). Normalises in place (an int
    of a float key becomes a float, a tuple of a list key a list). Raises :class:`ConfigError`."""
    for path, key in SCHEMA.items():
        try:
            value = get_by_path(cfg, path)
        except KeyError:
            raise ConfigError(f"config key '{path}' is missing") from None
        set_by_path(cfg, path, key.validate(value))
    for path, value in flatten(cfg, stop=()).items():
        if not is_plain(value):
            raise ConfigError(
                f"config key '{path}' must hold plain Python values (dict, list, str, number, bool, None), "
                f"got {type(value).__name__}"
            )


def resolve_section(section_path: str, cfg: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """One component's section (``"learner"``): ``cfg`` (a partial dict, or None) merged over the schema's
    defaults, every key checked, keys declared ``same_as`` a sibling filled from it when None.

    Errors are :class:`ConfigError` naming the full key (``learner.log_freq``). Used by components that are
    built from their section alone (``BaseLearner(policy, {"log_freq": 10})``); a run config resolved by
    :func:`rlearn.config.resolve_config` passes through unchanged but for the filled keys.
    """
    if section_path not in SECTIONS or section_path in ("", "policy"):
        raise KeyError(f"no framework section {section_path!r}")
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"config key '{section_path}' is a section and must be a dict, got {type(cfg).__name__} {cfg!r}")
    merged = merge_section(defaults(section_path), cfg, f"{section_path}.")
    prefix = f"{section_path}."
    for path, key in SCHEMA.items():
        if path.startswith(prefix):
            set_by_path(merged, path[len(prefix):], key.validate(get_by_path(merged, path[len(prefix):])))
    for path, key in SCHEMA.items():
        if path.startswith(prefix) and key.same_as:
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
