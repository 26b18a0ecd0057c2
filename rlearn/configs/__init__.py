"""Bundled run configs: one module per config, each defining ``config = dict(...)``.

``rlearn train <name>`` loads ``rlearn/configs/<name>.py``; :func:`available_configs` lists the names
(found by scanning this package, so a new file is picked up without registration). See
docs/configuration.md for the keys.
"""

from __future__ import annotations

import pkgutil
from typing import List

__all__ = ["available_configs"]


def available_configs() -> List[str]:
    """Names of the bundled configs (modules of this package not starting with ``_``), sorted."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
