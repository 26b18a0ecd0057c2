"""rlearn's algorithms. Each policy is one module a reader can follow top to bottom.

``TD3Policy`` and ``PPGPolicy`` are imported lazily, so ``import policies`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from policies.base import Policy, PolicyConfigError, is_scalar, merge_policy_config

_LAZY = {
    "TD3Policy": "policies.td3",
    "PPGPolicy": "policies.ppg",
}

__all__ = ["Policy", "PolicyConfigError", "is_scalar", "merge_policy_config", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'policies' has no attribute {name!r}")
