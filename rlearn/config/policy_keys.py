"""A policy's own config keys: each field of its nested ``Config`` dataclass is a
:class:`~rlearn.config.spec.Key` at ``policy.<name>``, like a framework key (a plain ``default_config`` has none)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping

from rlearn.config.keys import validate_keys
from rlearn.config.schema import _walk
from rlearn.config.spec import Key

__all__ = ["declaration_defaults", "policy_keys", "policy_keys_of", "validate_policy_section"]


def declaration_defaults(declaration: type) -> Dict[str, Any]:
    """The default values of the dataclass ``declaration`` as a fresh nested dict."""
    return dataclasses.asdict(declaration())


def policy_keys(policy_cls: Any) -> Dict[str, Key]:
    """The declared keys of a policy class (``policy.<name>`` -> Key, nested sections included)."""
    keys: Dict[str, Key] = {}
    declaration = getattr(policy_cls, "Config", None)
    if declaration is not None and dataclasses.is_dataclass(declaration):
        _walk(declaration, "policy.", keys, {})
    return keys


def policy_keys_of(cfg: Mapping[str, Any]) -> Dict[str, Key]:
    """The declared keys of the policy ``cfg`` names (empty for none or an unknown one: the loader reports it)."""
    section = cfg.get("policy")
    policy_type = section.get("type") if isinstance(section, Mapping) else None
    if not isinstance(policy_type, str):
        return {}
    from rlearn.registry import get_policy_class

    try:
        return policy_keys(get_policy_class(policy_type))
    except Exception:  # an unresolvable type is reported where the config is resolved
        return {}


def validate_policy_section(section: Dict[str, Any], keys: Mapping[str, Key]) -> None:
    """Check every declared key (``policy.<key>``) of a merged policy section in place."""
    validate_keys(section, keys, "policy.")

