"""Polyak averaging of target networks."""

from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["polyak_update_"]


@torch.no_grad()
def polyak_update_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor], tau: float) -> None:
    """``target <- target + tau * (source - target)`` for every pair, in place, in one ``_foreach`` kernel
    call (a Python loop of ``lerp_`` costs a dispatch per tensor)."""
    if len(targets) != len(sources):
        raise ValueError(f"polyak_update_: {len(targets)} targets but {len(sources)} sources")
    torch._foreach_lerp_(list(targets), list(sources), tau)
