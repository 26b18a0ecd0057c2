"""Polyak averaging of target networks."""

from __future__ import annotations

from typing import Sequence

import torch

from rlearn.optim import foreach

__all__ = ["polyak_update_"]


@torch.no_grad()
def polyak_update_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor], tau: float) -> None:
    """``target <- target + tau * (source - target)`` for every pair, in place, in one multi-tensor kernel
    call where the running torch passes :func:`rlearn.optim.foreach.available` (a Python loop of ``lerp_``
    costs a dispatch per tensor)."""
    if len(targets) != len(sources):
        raise ValueError(f"polyak_update_: {len(targets)} targets but {len(sources)} sources")
    foreach.lerp_(targets, sources, tau)
