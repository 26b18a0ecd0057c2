"""rlearn's algorithms, each one module a reader can follow top to bottom (imported lazily, so ``import policies``
stays cheap). A config names its policy with ``policy.type``: a registered name (``"td3"``, ``"sac"``, ``"ppo"``,
``"ppg"``, ``"dqn"`` or one added with :func:`register_policy`) or an import path ``"package.module:ClassName"``.
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
