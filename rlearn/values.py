"""Type predicates for user-given values, with the standard library only (``rlearn.trace`` imports them without
loading torch or numpy; ``rlearn.config`` re-exports them)."""

from __future__ import annotations

import numbers
from typing import Any, Optional

__all__ = ["is_int", "is_real", "check_int"]


def is_int(value: Any) -> bool:
    """An integer that is not a bool (``True`` is an ``int`` to Python, never to a config)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(what: str, value: Any, minimum: int = 1, *, optional: bool = False) -> Optional[int]:
    """``value`` as an int >= ``minimum`` (None passes when ``optional``); else ``ValueError`` naming ``what``."""
    if value is None and optional:
        return None
    if is_int(value) and value >= minimum:
        return int(value)
    expected = "a positive int" if minimum == 1 else f"an int >= {minimum}"
    raise ValueError(f"{what} must be {expected}{' or None' if optional else ''}, got {value!r}")
