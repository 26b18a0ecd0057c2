"""A name -> class registry, so that configs can name the objects they want built::

    MODELS = Registry("model")

    @MODELS.register                 # under its class name, "MLP" (or: @MODELS.register("mlp"))
    class MLP: ...

    model = MODELS.build({"type": "MLP", "hidden": 64})   # MLP(hidden=64)

:data:`HOOKS` holds the hooks, :data:`POLICIES` the names ``policy.type`` accepts (:func:`register_policy`).
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, TypeVar, Union

__all__ = ["Registry", "RegistryError", "HOOKS", "POLICIES", "register_policy", "get_policy_class",
           "registered_policies", "defined_at"]

T = TypeVar("T", bound=Callable[..., Any])


class RegistryError(KeyError, ValueError):
    """An unknown name (or a missing ``type``) in a registry: a ``ValueError``, and a ``KeyError`` like any missing
    mapping key (callers of ``Registry.get`` and ``build_hook`` catch that)."""

    def __str__(self) -> str:  # KeyError would otherwise print the repr of the message
        return str(self.args[0]) if self.args else ""


class Registry:
    """Maps names to classes (or other callables) and builds them from config dicts; ``name`` (what it holds,
    ``"hook"``) is used in error messages."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Registry name must be a non-empty str, got {name!r}")
        self.name = name
        self._entries: Dict[str, Callable[..., Any]] = {}

    def register(self, obj: Union[T, str, None] = None, *, name: Optional[str] = None, force: bool = False) -> Any:
        """Register a class under its ``__name__`` or an explicit name: ``@REG.register``,
        ``@REG.register("name")``, ``@REG.register(name="name")`` or ``REG.register(cls, name=...)``. A name
        already taken raises ``ValueError`` unless ``force=True``."""
        if isinstance(obj, str):
            if name is not None:
                raise TypeError("give the name once: register('name') or register(name='name')")
            obj, name = None, obj
        if obj is None:  # used as a decorator
            return lambda cls: self._add(cls, name, force)
        return self._add(obj, name, force)

    def _add(self, obj: T, name: Optional[str], force: bool) -> T:
        if not callable(obj):
            raise TypeError(f"{self.name} registry: can only register classes or callables, got {obj!r}")
        if name is None:
            name = getattr(obj, "__name__", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"{self.name} registry: the name must be a non-empty str, got {name!r}")
        taken = self._entries.get(name, obj)
        if taken is not obj and not force:
            owner = ".".join(filter(None, (getattr(taken, "__module__", None),
                                           getattr(taken, "__qualname__", repr(taken)))))
            raise ValueError(f"{self.name} registry: the name {name!r} is already taken by {owner}; "
                             "pick another name or pass force=True to replace it")
        self._entries[name] = obj
        return obj

    def get(self, name: str) -> Callable[..., Any]:
        """The class registered as ``name``; :class:`RegistryError` (a KeyError) listing the known names."""
        if not isinstance(name, str):
            raise TypeError(f"{self.name} registry: names are strings, got {name!r}")
        if name not in self._entries:
            close = difflib.get_close_matches(name, self.names(), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise RegistryError(f"unknown {self.name} type {name!r}.{hint} {self._known()}")
        return self._entries[name]

    def _known(self) -> str:
        return f"Known {self.name} types: {', '.join(self.names()) or '(none registered)'}"

    def names(self) -> List[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.name!r}, names={self.names()})"

    def build(self, cfg: Mapping[str, Any], **overrides: Any) -> Any:
        """Build ``cfg["type"]`` with the other entries of ``cfg`` (and ``overrides``) as keyword arguments; a
        missing or unknown ``type`` is a :class:`RegistryError`, a bad argument a ``TypeError`` naming both."""
        if not isinstance(cfg, Mapping):
            raise TypeError(f"{self.name} config must be a dict with a 'type' key, got {type(cfg).__name__}: {cfg!r}")
        if "type" not in cfg:
            raise RegistryError(f"{self.name} config {dict(cfg)!r} has no 'type' key. {self._known()}")
        factory = type_name = cfg["type"]
        if isinstance(type_name, str):
            factory = self.get(type_name)
        elif callable(factory) and factory in self._entries.values():
            type_name = getattr(factory, "__name__", repr(factory))
        else:
            raise RegistryError(f"{self.name} config 'type' must be a registered name, got {factory!r}. "
                                f"{self._known()}")
        kwargs = {**{key: value for key, value in cfg.items() if key != "type"}, **overrides}
        try:  # also a non-str argument name
            return factory(**kwargs)
        except TypeError as exc:
            raise TypeError(f"cannot build {self.name} {type_name!r} from {dict(cfg)!r}: {exc}") from exc


#: registry of hook classes (``rlearn.hooks``); ``rlearn.hooks.build_hook`` builds from it
HOOKS = Registry("hook")
#: the policy classes: each bundled policy's module registers itself (``@register_policy("td3")``), as a user's does
POLICIES = Registry("policy")


def _policy_base() -> type:
    """``policies.Policy``, with every bundled policy imported (and so registered); never imported with
    ``rlearn``, since ``policies`` itself imports ``rlearn``."""
    import policies

    return policies.Policy


def register_policy(name: str) -> Callable[[T], T]:
    """Class decorator: make a ``policies.Policy`` subclass available as ``policy.type = name``."""

    def decorator(cls: T) -> T:
        if not (isinstance(cls, type) and issubclass(cls, _policy_base())):
            raise TypeError(f"register_policy({name!r}) expects a Policy subclass, got {cls!r}")
        POLICIES.register(cls, name=name, force=True)
        return cls

    return decorator


def registered_policies() -> List[str]:
    """Names accepted as ``policy.type`` without an import path (the bundled policies' and registered ones)."""
    _policy_base()
    return POLICIES.names()


def get_policy_class(name: str) -> type:
    """Resolve ``policy.type``: a registered name or ``"module:Class"``; unknown names list the known ones."""
    if not isinstance(name, str):
        raise TypeError(f"policy.type must be a string, got {type(name).__name__}")
    base = _policy_base()
    if name in POLICIES:
        return POLICIES.get(name)
    if ":" not in name:
        raise RegistryError(f"unknown policy type {name!r}; registered: {', '.join(POLICIES.names())} "
                            "(or give an import path 'package.module:ClassName')")
    module_name, _, attr = name.partition(":")
    if not module_name or not attr:
        raise ValueError(f"policy import path must look like 'package.module:ClassName', got {name!r}")
    cls = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise TypeError(f"policy type {name!r} resolves to {cls!r}, which is not a policies.Policy subclass")
    return cls


def defined_at(function: Any) -> str:
    """``file:line`` where a function (or method) is defined (``?`` when unknown), for messages about user code."""
    import inspect

    function = inspect.unwrap(getattr(function, "__func__", function))
    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return "?"
