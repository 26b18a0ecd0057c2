"""Checking an on-policy rollout before a policy learns from it (shared by PPO and PPG)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence

import torch

__all__ = ["ROLLOUT_KEYS", "check_rollout"]

#: what the on-policy loop hands ``_forward_learn`` (``[T, N, ...]`` each; see rlearn.buffer.rollout)
ROLLOUT_KEYS = ("obs", "action", "reward", "next_obs", "terminated", "truncated", "log_prob", "value")


def check_rollout(data: Any, owner: str, device: Any, discrete: bool,
                  keys: Sequence[str] = ROLLOUT_KEYS) -> Dict[str, torch.Tensor]:
    """The rollout as float32 tensors on ``device`` (int64 actions when ``discrete``), checked: not a dict, a
    missing key, ``reward`` not ``[T, N]``, another key not ``[T, N, ...]`` or NaN/inf is an error naming ``owner``
    and the key."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{owner}._forward_learn expects a rollout dict, got {type(data).__name__}")
    missing = [key for key in keys if key not in data]
    if missing:
        raise KeyError(f"{owner}: rollout is missing {missing} (it has {sorted(data)})")
    rollout = {key: torch.as_tensor(data[key], dtype=torch.float32).to(device) for key in keys}
    shape = rollout["reward"].shape
    if len(shape) != 2:
        raise ValueError(f"{owner}: rollout 'reward' must be [T, N], got shape {tuple(shape)}")
    for key, tensor in rollout.items():
        if tuple(tensor.shape[:2]) != tuple(shape):
            raise ValueError(f"{owner}: rollout {key!r} has shape {tuple(tensor.shape)}, expected [T, N, ...] = {tuple(shape)}")
    # one host transfer for every key (not one per key, which on a GPU is a device sync each)
    finite = torch.stack([torch.isfinite(tensor).all() for tensor in rollout.values()]).tolist()
    for key, ok in zip(rollout, finite):
        if not ok:
            raise ValueError(f"{owner}: rollout {key!r} contains NaN or inf")
    if discrete:
        rollout["action"] = rollout["action"].long()
    return rollout
