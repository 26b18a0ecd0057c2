"""What on-policy actor-critics (PPO, PPG) share at their edges: :func:`action_spec` (the spaces and the action
head) and :func:`sample_categorical` (inverse-CDF sampling with the policy's own generator).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np
import torch
from gymnasium import spaces

__all__ = ["ActionSpec", "action_spec", "sample_categorical"]


@dataclass(frozen=True)
class ActionSpec:
    """The action head a policy builds: ``discrete``, ``n_outputs`` (actions or dimensions) and a Box's float32
    bounds."""

    discrete: bool
    n_outputs: int
    low: Optional[np.ndarray] = None
    high: Optional[np.ndarray] = None


def action_spec(observation_space: Any, action_space: Any, owner: str) -> Tuple[int, ActionSpec]:
    """``(obs_dim, ActionSpec)`` for a flat ``Box`` observation space and a ``Discrete`` or 1-D ``Box`` action
    space; else a TypeError naming ``owner`` and the space."""
    if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
        raise TypeError(f"{owner} needs a flat Box observation space, got {observation_space!r}")
    obs_dim = int(observation_space.shape[0])
    if isinstance(action_space, spaces.Discrete):
        return obs_dim, ActionSpec(True, int(action_space.n))
    if isinstance(action_space, spaces.Box) and len(action_space.shape) == 1:
        return obs_dim, ActionSpec(False, int(action_space.shape[0]),
                                   np.asarray(action_space.low, dtype=np.float32),
                                   np.asarray(action_space.high, dtype=np.float32))
    raise TypeError(f"{owner} supports Discrete or 1-D Box action spaces, got {action_space!r}")


def sample_categorical(logits: torch.Tensor, np_random: np.random.Generator) -> Tuple[np.ndarray, torch.Tensor]:
    """``(actions [N] int64, log_prob [N])`` for ``logits [N, A]``: the first class whose cumulative
    probability reaches a uniform draw (inverse CDF), and its log-probability from ``log_softmax``."""
    log_pi = torch.log_softmax(logits, dim=-1)
    probs = log_pi.exp().cpu().numpy().astype(np.float64)
    uniform = np_random.random((probs.shape[0], 1))
    action = (probs.cumsum(axis=-1) < uniform).sum(axis=-1).clip(max=probs.shape[1] - 1)
    action_t = torch.as_tensor(action, device=logits.device)
    return action.astype(np.int64), log_pi.gather(-1, action_t.unsqueeze(-1)).squeeze(-1)
