"""The one config error type (its own module so that low-level packages import it without cycles)."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A config is wrong (unknown key, bad value, missing file); the one-line message names the full dotted key.
    ``LearnerConfigError`` and ``PolicyConfigError`` subclass it."""
