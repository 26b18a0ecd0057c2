"""The one config error type (its own module so that low-level packages import it without cycles)."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A config is wrong: unknown key, bad value, missing file. The message is one line naming the culprit
    by its full dotted key (``learner.monitor_windows.loss``, ``policy.batch_size``).

    Component errors subclass it: ``LearnerConfigError`` (``rlearn.learner``), ``PolicyConfigError``
    (``policies``), so ``except ConfigError`` catches every config mistake.
    """
