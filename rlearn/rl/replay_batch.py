"""Checking what a policy learns from: a replay minibatch (TD3, SAC, DQN) or an on-policy rollout (PPO, PPG)."""

from __future__ import annotations

import math
from collections import abc
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from rlearn.buffer.replay import ReplayBatch

__all__ = ["BATCH_KEYS", "check_replay_batch", "host_values", "ROLLOUT_KEYS", "check_rollout"]

#: what ``ReplayBuffer.sample`` hands ``_forward_learn``
BATCH_KEYS = ("obs", "action", "reward", "next_obs", "terminated")


def host_values(tensors: Sequence[torch.Tensor]) -> List[Any]:
    """The values of 0-d ``tensors`` as Python numbers: one ``stack(...).tolist()`` on an accelerator (one sync),
    ``item()`` each on the CPU (cheaper there). Mixed dtypes are promoted on an accelerator."""
    if tensors[0].device.type == "cpu":
        return [t.item() for t in tensors]
    return torch.stack(list(tensors)).tolist()


def check_replay_batch(data: Any, owner: str, device: torch.device, obs_shape: Sequence[int],
                       action_shape: Sequence[int] = (), n_actions: Optional[int] = None) -> Tuple[torch.Tensor, ...]:
    """``(obs, action, reward, next_obs, terminated)`` of a replay minibatch on ``device``, checked: float32 with
    observations ``[B, obs_dim]`` and continuous actions ``[B, dim]``, discrete ones (``n_actions``) int64 ``[B]``.
    Every problem (type, key, dtype, shape, index range, NaN/inf) raises naming ``owner`` and the key; a
    :class:`~rlearn.buffer.ReplayBatch` skips the NaN/inf test (``ReplayBuffer.add`` checked its values).
    """
    name = f"{owner}._forward_learn"
    if not isinstance(data, abc.Mapping):  # collections.abc's: a third of typing.Mapping's check time
        raise TypeError(f"{name} expects a dict of tensors, got {type(data).__name__}")
    missing = [key for key in BATCH_KEYS if key not in data]
    if missing:
        raise KeyError(f"{name}: batch is missing {missing} (has {sorted(data)})")
    discrete = n_actions is not None
    shapes = {"obs": tuple(obs_shape), "next_obs": tuple(obs_shape), "action": () if discrete else tuple(action_shape)}
    first = data["obs"]
    batch = first.shape[0] if isinstance(first, torch.Tensor) and first.dim() else 0
    out: List[torch.Tensor] = []
    for key in BATCH_KEYS:
        value = data[key]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name}: batch[{key!r}] must be a torch.Tensor, got {type(value).__name__}")
        if key == "action" and discrete:
            if value.is_floating_point() or value.dtype == torch.bool or value.is_complex():
                raise TypeError(f"{name}: batch['action'] must be an integer tensor of action indices, got {value.dtype}")
        elif not value.is_floating_point():
            raise TypeError(f"{name}: batch[{key!r}] must be a float tensor, got {value.dtype}")
        shape = shapes.get(key, ())
        if batch < 1 or value.shape != (batch, *shape):
            raise ValueError(f"{name}: batch[{key!r}] has shape {tuple(value.shape)}, "
                             f"expected {(batch if batch >= 1 else 'B>0', *shape)}")
        dtype = torch.long if key == "action" and discrete else torch.float32
        if value.dtype != dtype or value.device != device:  # each call costs a dispatch
            value = value.to(device, dtype, non_blocking=True)
        out.append(value.reshape(batch, -1) if len(shape) > 1 else value)
    if isinstance(data, ReplayBatch):  # drawn from a ReplayBuffer, whose add() checked its values
        if discrete:
            _check_indices(out[1], name, n_actions, None)
        return tuple(out)
    floats = [t for key, t in zip(BATCH_KEYS, out) if not (discrete and key == "action")]
    total = torch.cat([t.reshape(-1) for t in floats]).sum()
    if discrete:
        total = _check_indices(out[1], name, n_actions, total)
    else:
        total = total.item()
    if not math.isfinite(total):
        bad = [key for key, t in zip(BATCH_KEYS, out) if t.is_floating_point() and not bool(torch.isfinite(t).all())]
        if bad:
            raise ValueError(f"{name}: non-finite values (NaN/inf) in batch {bad}; nothing was updated")
    return tuple(out)


def _check_indices(action: torch.Tensor, name: str, n_actions: int, total: Optional[torch.Tensor]) -> Any:
    """Refuse discrete actions outside ``[0, n_actions)``; fetches ``total`` (if any) in the same host transfer
    and returns its value."""
    low, high = torch.aminmax(action)
    values = host_values([low, high] if total is None else [low, high, total])
    if values[0] < 0 or values[1] >= n_actions:
        raise ValueError(f"{name}: batch['action'] holds indices outside [0, {n_actions})")
    return values[2] if total is not None else None


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
