"""Type predicates for user-given values, with the standard library only (``rlearn.trace`` imports them without
loading torch or numpy; ``rlearn.config`` re-exports them)."""

from __future__ import annotations

import numbers
from typing import Any

__all__ = ["is_int", "is_real"]


def is_int(value: Any) -> bool:
    """An integer that is not a bool (``True`` is an ``int`` to Python, never to a config)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
