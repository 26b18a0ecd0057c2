"""rlearn's algorithms. Each policy is one module a reader can follow top to bottom.

``TD3Policy``, ``PPGPolicy``, ``PPOPolicy``, ``DQNPolicy`` and ``SACPolicy`` are imported lazily, so ``import policies`` stays cheap.
A config names its policy with ``policy.type``: a registered name (``"td3"``, ``"ppg"``, ``"ppo"``, ``"dqn"``, ``"sac"``, or one added with
:func:`register_policy`) or an import path ``"package.module:ClassName"``. The registry itself lives in
:mod:`rlearn.registry` and resolves names lazily, so ``rlearn`` never imports this package at import time.
"""

from __future__ import annotations

import importlib
from typing import Any

from policies.base import Policy, PolicyConfigError, is_scalar, merge_policy_config
from rlearn.registry import get_policy_class, register_policy, registered_policies

_LAZY = {
    "TD3Policy": "policies.td3",
    "PPGPolicy": "policies.ppg",
    "PPOPolicy": "policies.ppo",
    "DQNPolicy": "policies.dqn",
    "SACPolicy": "policies.sac",
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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'policies' has no attribute {name!r}")
