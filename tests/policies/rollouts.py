"""Shared by the on-policy tests (PPO, PPG): small spaces and synthetic rollouts."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

DISCRETE = (spaces.Box(-1.0, 1.0, (4,), np.float32), spaces.Discrete(3))
CONTINUOUS = (spaces.Box(-1.0, 1.0, (3,), np.float32), spaces.Box(-2.0, 2.0, (2,), np.float32))


def make_rollout(policy, T=8, N=2, seed=0, done_prob=0.15):
    """A synthetic on-policy rollout [T, N]: random observations, actions from ``_forward_collect``,
    random rewards and episode ends (terminated and truncated both occur)."""
    rng = np.random.default_rng(seed)
    obs_dim = policy.observation_space.shape[0]
    obs = rng.uniform(-1, 1, (T + 1, N, obs_dim)).astype(np.float32)
    steps = [policy._forward_collect(obs[t], envstep=t * N) for t in range(T)]
    ends = rng.random((T, N))
    data = {
        "obs": obs[:-1],
        "next_obs": obs[1:],
        "reward": rng.normal(size=(T, N)).astype(np.float32),
        "terminated": (ends < done_prob / 2).astype(np.float32),
        "truncated": ((ends >= done_prob / 2) & (ends < done_prob)).astype(np.float32),
    }
    for key in steps[0]:
        data[key] = np.stack([s[key] for s in steps])
    return {key: torch.as_tensor(value) for key, value in data.items()}
