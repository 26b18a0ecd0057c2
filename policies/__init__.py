"""rlearn's algorithms. Each policy is one module a reader can follow top to bottom.

``TD3Policy`` and ``PPGPolicy`` are imported lazily, so ``import policies`` stays cheap.
A config names its policy with ``policy.type``: a registered name (``"td3"``, ``"ppg"``, or one added with
:func:`register_policy`) or an import path ``"package.module:ClassName"``.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, Type, TypeVar

from policies.base import Policy, PolicyConfigError, is_scalar, merge_policy_config

_LAZY = {
    "TD3Policy": "policies.td3",
    "PPGPolicy": "policies.ppg",
}

#: registered policy names -> class, or "module:Class" strings resolved on first use
_REGISTRY: Dict[str, Any] = {
    "td3": "policies.td3:TD3Policy",
    "ppg": "policies.ppg:PPGPolicy",
}

__all__ = [
    "Policy",
    "PolicyConfigError",
    "is_scalar",
    "merge_policy_config",
    "register_policy",
    "get_policy_class",
    "registered_policies",
    *_LAZY,
]

P = TypeVar("P", bound=Type[Policy])


def register_policy(name: str) -> Callable[[P], P]:
    """Class decorator: make a :class:`Policy` subclass available as ``policy.type = name``."""

    def decorator(cls: P) -> P:
        if not (isinstance(cls, type) and issubclass(cls, Policy)):
            raise TypeError(f"register_policy({name!r}) expects a Policy subclass, got {cls!r}")
        _REGISTRY[name] = cls
        return cls

    return decorator


def registered_policies() -> list:
    """Names accepted as ``policy.type`` without an import path."""
    return sorted(_REGISTRY)


def _import_path(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"policy import path must look like 'package.module:ClassName', got {path!r}")
    return getattr(importlib.import_module(module_name), attr)


def get_policy_class(name: str) -> Type[Policy]:
    """Resolve ``policy.type``: a registered name or ``"module:Class"``; unknown names list the known ones."""
    if not isinstance(name, str):
        raise TypeError(f"policy.type must be a string, got {type(name).__name__}")
    target = _REGISTRY.get(name)
    if target is None and ":" in name:
        target = name
    if target is None:
        raise KeyError(
            f"unknown policy type {name!r}; registered: {', '.join(registered_policies())} "
            "(or give an import path 'package.module:ClassName')"
        )
    cls = _import_path(target) if isinstance(target, str) else target
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"policy type {name!r} resolves to {cls!r}, which is not a policies.Policy subclass")
    return cls


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'policies' has no attribute {name!r}")
