"""``to_numpy``: any array-like (numpy, torch tensor, list, scalar) as a numpy array, without importing torch."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["to_numpy"]


def to_numpy(value: Any, copy: bool = True) -> np.ndarray:
    """``value`` as a numpy array; torch tensors are detached and moved to the CPU (torch is not imported here)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy().copy() if copy else value.detach().cpu().numpy()
    return np.array(value, copy=True) if copy else np.asarray(value)
