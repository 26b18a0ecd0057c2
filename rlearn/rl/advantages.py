"""Advantage estimation for on-policy rollouts ``[T, N]``: GAE(lambda) (Schulman et al., 2015,
https://arxiv.org/abs/1506.02438) with gymnasium's two kinds of episode end, and ``explained_variance``.
"""

from __future__ import annotations

from typing import Tuple

import torch

__all__ = ["compute_gae", "explained_variance"]


def compute_gae(reward: torch.Tensor, value: torch.Tensor, next_value: torch.Tensor, terminated: torch.Tensor,
                truncated: torch.Tensor, gamma: float, gae_lambda: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """GAE(lambda) ``(advantages, value_targets = advantages + value)`` for a rollout of ``[T, N]`` tensors;
    ``next_value[t] = V(next_obs[t])`` bootstraps every step that did not *terminate*, and the recursion
    ``A[t] = delta[t] + gamma * lambda * A[t+1]`` stops at every episode end (``A[T] = 0``)."""
    not_terminated = 1.0 - terminated
    episode_continues = (1.0 - terminated) * (1.0 - truncated)
    delta = reward + gamma * not_terminated * next_value - value
    advantages = torch.zeros_like(reward)
    running = torch.zeros_like(reward[0])
    for t in reversed(range(reward.shape[0])):
        running = delta[t] + gamma * gae_lambda * episode_continues[t] * running
        advantages[t] = running
    return advantages, advantages + value


def explained_variance(prediction: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var(target - prediction) / Var(target)``: 1 is a perfect value function, 0 no better than a
    constant, negative worse. ``nan`` when the targets are all equal (the ratio is undefined)."""
    target_var = target.var(unbiased=False)
    if target_var.item() == 0.0:
        return float("nan")
    return (1.0 - (target - prediction).var(unbiased=False) / target_var).item()
