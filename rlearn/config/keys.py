"""Dotted key paths over a nested config dict, and the "did you mean" suggestions for unknown keys."""

from __future__ import annotations

import difflib
from typing import Any, Dict, Iterable, List, Mapping, Sequence

from rlearn.config.errors import ConfigError
from rlearn.config.schema import FREE_FORM

__all__ = ["flatten", "get_by_path", "set_by_path", "known_paths", "suggest", "unknown_key_error"]


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


def known_paths(cfg: Mapping[str, Any]) -> List[str]:
    """Every dotted key of ``cfg``, sections included (so ``learner`` and ``learner.log_freq`` both count)."""
    paths: List[str] = []

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            paths.append(path)
            if isinstance(value, Mapping) and path not in FREE_FORM:
                walk(value, f"{path}.")

    walk(cfg, "")
    return paths


def suggest(key: str, known: Sequence[str], n: int = 3) -> List[str]:
    """The existing dotted keys closest to ``key``, best first: keys of the same section with a similar
    name, then keys anywhere with a very similar name (``max_env_steps`` -> ``train.max_env_steps``),
    then very similar whole paths."""
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
    close = suggest(key, known)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    section, _, _ = key.rpartition(".")
    siblings = sorted(k.rsplit(".", 1)[-1] for k in known if k.rpartition(".")[0] == section)
    where = f"'{section}'" if section else "the top level"
    listing = f" (keys at {where}: {', '.join(siblings)})" if siblings else ""
    return ConfigError(f"unknown config key '{key}'{owner}{hint}{listing}")


