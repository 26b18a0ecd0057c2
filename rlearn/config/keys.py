"""Dotted keys of a nested config: paths, "did you mean" suggestions, merging over the defaults, checking values."""

from __future__ import annotations

import copy
import difflib
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from rlearn.config.errors import ConfigError
from rlearn.config.schema import FREE_FORM, SCHEMA, SECTIONS, defaults
from rlearn.config.spec import Key

__all__ = ["flatten", "get_by_path", "set_by_path", "known_paths", "suggest", "unknown_key_error", "merge_section",
           "validate_keys", "validate_config", "resolve_section", "undeclared_window_warnings", "is_plain"]


def flatten(cfg: Mapping[str, Any], prefix: str = "", stop: Iterable[str] = FREE_FORM) -> Dict[str, Any]:
    """``{"train": {"max_env_steps": 5}}`` -> ``{"train.max_env_steps": 5}``; dicts named in ``stop`` and
    empty dicts stay whole (they are values)."""
    stop = tuple(stop)
    out: Dict[str, Any] = {}
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and path not in stop:
            out.update(flatten(value, f"{path}.", stop))
        else:
            out[path] = value
    return out


def get_by_path(cfg: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` (``KeyError`` naming the path when absent)."""
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def set_by_path(cfg: Mapping[str, Any], path: str, value: Any) -> None:
    """Set the value at dotted ``path`` (its parent must exist)."""
    parent_path, _, leaf = path.rpartition(".")
    parent = get_by_path(cfg, parent_path) if parent_path else cfg
    parent[leaf] = value


def known_paths(cfg: Mapping[str, Any], prefix: str = "") -> List[str]:
    """Every dotted key of ``cfg``, sections included (so ``learner`` and ``learner.log_freq`` both count)."""
    paths: List[str] = []
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        paths.append(path)
        if isinstance(value, Mapping) and path not in FREE_FORM:
            paths += known_paths(value, f"{path}.")
    return paths


def suggest(key: str, known: Sequence[str], n: int = 3) -> List[str]:
    """The existing dotted keys closest to ``key``, best first: similar names in its section, then very similar
    names anywhere (``max_env_steps`` -> ``train.max_env_steps``), then very similar whole paths."""
    section, _, leaf = key.rpartition(".")
    by_leaf: Dict[str, List[str]] = {}
    siblings: Dict[str, str] = {}
    for path in known:
        parent, _, name = path.rpartition(".")
        by_leaf.setdefault(name, []).append(path)
        if parent == section:
            siblings[name] = path
    found: List[str] = [siblings[name] for name in difflib.get_close_matches(leaf, list(siblings), n=n, cutoff=0.6)]
    for name in difflib.get_close_matches(leaf, list(by_leaf), n=n, cutoff=0.8):
        found.extend(by_leaf[name])
    found.extend(difflib.get_close_matches(key, known, n=n, cutoff=0.8))
    unique = [path for i, path in enumerate(found) if path not in found[:i] and path != key]
    return unique[:n]


def unknown_key_error(key: str, known: Sequence[str], owner: str = "") -> ConfigError:
    """The error for an unknown ``key``: the closest ``known`` keys and the keys of its section."""
    close = suggest(key, known)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    section, _, _ = key.rpartition(".")
    siblings = sorted(k.rsplit(".", 1)[-1] for k in known if k.rpartition(".")[0] == section)
    where = f"'{section}'" if section else "the top level"
    listing = f" (keys at {where}: {', '.join(siblings)})" if siblings else ""
    return ConfigError(f"unknown config key '{key}'{owner}{hint}{listing}")


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
                  known: Optional[Sequence[str]] = None, owner: str = "") -> Dict[str, Any]:
    """``base`` (defaults) updated with ``user``, recursively for nested sections. A key ``base`` lacks is a
    :class:`ConfigError` naming its path (``prefix`` + key), ``owner`` (`` for policy 'td3'``) and the closest of
    ``known`` (default: every framework key). Framework sections merge key by key, ``policy`` and the free-form
    dicts (``env.kwargs``) are taken whole; in a policy's section (``owner``) every nested dict merges."""
    known = known_paths(defaults()) if known is None else known
    merged = copy.deepcopy(dict(base))
    bad = [key for key in user if not isinstance(key, str)]
    if bad:
        raise ConfigError(f"config keys must be strings, got {bad[0]!r} in '{prefix[:-1] or 'the top level'}'")
    unknown = [f"{prefix}{key}" for key in user if key not in merged]
    if unknown:
        also = f"; also unknown: {', '.join(repr(p) for p in unknown[1:])}" if len(unknown) > 1 else ""
        raise ConfigError(f"{unknown_key_error(unknown[0], known, owner)}{also}")
    for key, value in user.items():
        path = f"{prefix}{key}"
        if owner:
            nested = isinstance(merged[key], dict) and isinstance(value, Mapping)
        else:
            nested = isinstance(merged[key], dict) and path in SECTIONS and path != "policy"
            if nested and not isinstance(value, Mapping):
                raise ConfigError(f"config key '{path}' is a section and must be a dict, got {value!r}")
        merged[key] = merge_section(merged[key], value, f"{path}.", known, owner) if nested else copy.deepcopy(value)
    return merged


def validate_keys(cfg: Dict[str, Any], keys: Mapping[str, Key], prefix: str = "") -> None:
    """Check and normalise in place (:meth:`Key.validate`) every key of ``keys``, dotted paths starting with
    ``prefix`` (the section ``cfg`` is); a :class:`ConfigError` names the key or item."""
    for path, key in keys.items():
        relative = path[len(prefix):]
        try:
            value = get_by_path(cfg, relative)
        except KeyError:
            raise ConfigError(f"config key '{path}' is missing") from None
        set_by_path(cfg, relative, key.validate(value))


def validate_config(cfg: Dict[str, Any]) -> None:
    """Check every framework key of a resolved config and that all values are plain Python literals (so the
    config can be dumped and read back)."""
    validate_keys(cfg, SCHEMA)
    for path, value in flatten(cfg, stop=()).items():
        if not is_plain(value):
            raise ConfigError(f"config key '{path}' must hold plain Python values (dict, list, str, number, bool, "
                              f"None), got {type(value).__name__}")


def resolve_section(section_path: str, cfg: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """One component's section (``"learner"``): ``cfg`` (partial, or None) merged over the defaults, checked, keys
    declared ``same_as`` a sibling filled from it when None (``BaseLearner(policy, {"log_freq": 10})``)."""
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
    """One warning per key of ``learner.monitor_windows`` not in ``declared`` (the monitor keys the policy
    ``owner`` and the run declare): its window would never be used, most often a typo."""
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
