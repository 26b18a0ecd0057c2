"""Checks of a policy's config values with messages that name the policy and the key (``PolicyConfigError``).

Each policy binds its own name once, e.g. ``_check_int = functools.partial(check_int, "TD3Policy")``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

from policies.base import PolicyConfigError

__all__ = ["check_int", "check_float", "check_bool", "check_sizes", "check_choice"]


def check_int(policy: str, key: str, value: Any, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (bools are not ints here)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise PolicyConfigError(f"{policy}: 'policy.{key}' must be an int >= {minimum}, got {value!r}")
    return int(value)


def check_float(policy: str, key: str, value: Any, low: float, high: float, low_open: bool = False) -> float:
    """``value`` as a finite float in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and value <= high
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}]"
        raise PolicyConfigError(f"{policy}: 'policy.{key}' must be a number in {interval}, got {value!r}")
    return float(value)


def check_bool(policy: str, key: str, value: Any) -> bool:
    """``value`` if it is a bool (``0``/``1`` are not)."""
    if not isinstance(value, bool):
        raise PolicyConfigError(f"{policy}: 'policy.{key}' must be true or false, got {value!r}")
    return value


def check_sizes(policy: str, key: str, value: Any) -> list:
    """``value`` as a non-empty list of ints >= 1 (layer widths such as ``hidden_sizes``)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise PolicyConfigError(f"{policy}: 'policy.{key}' must be a non-empty list of ints, got {value!r}")
    return [check_int(policy, f"{key}[{i}]", size, 1) for i, size in enumerate(value)]


def check_choice(policy: str, key: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of the strings ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise PolicyConfigError(f"{policy}: 'policy.{key}' must be one of {list(choices)}, got {value!r}")
    return value
