"""Bundled run configs: one module per config, each defining ``config = dict(...)``; ``rlearn train <name>``
loads ``rlearn/configs/<name>.py`` (a new file is picked up without registration)."""

from __future__ import annotations

import pkgutil
from typing import List

__all__ = ["available_configs"]


def available_configs() -> List[str]:
    """Names of the bundled configs (modules of this package not starting with ``_``), sorted."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
