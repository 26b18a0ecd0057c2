"""On-policy rollouts: a collector's transitions as the ``[T, N, ...]`` tensors ``_forward_learn`` receives
(time-major, so GAE can run backwards over ``T``; :func:`flatten_rollout` makes a flat batch)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Union

import numpy as np
import torch

from rlearn.arrays import to_numpy

#: keys every rollout has (besides the extra keys the policy's ``_forward_collect`` returned)
ROLLOUT_KEYS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")


def rollout_to_tensors(rollout: Any, device: Union[str, torch.device] = "cpu") -> Dict[str, torch.Tensor]:
    """Every key of a rollout (a :class:`~rlearn.collect.CollectResult` or its ``transitions``: :data:`ROLLOUT_KEYS`
    and extra per-step keys) as a ``[T, N, ...]`` tensor on ``device``: float32, integer arrays as int64."""
    transitions = rollout if isinstance(rollout, Mapping) else getattr(rollout, "transitions", rollout)
    if not isinstance(transitions, Mapping):
        raise TypeError(f"rollout_to_tensors expects a CollectResult or a dict of arrays, got {type(rollout).__name__}")
    missing = [key for key in ROLLOUT_KEYS if key not in transitions]
    if missing:
        raise KeyError(f"rollout_to_tensors: the rollout lacks {missing} (have {sorted(map(str, transitions))})")
    lead = to_numpy(transitions["reward"], copy=False).shape
    if len(lead) != 2:
        raise ValueError(f"rollout_to_tensors: 'reward' has shape {lead}, expected [T, N]")
    out: Dict[str, torch.Tensor] = {}
    for key, value in transitions.items():
        array = to_numpy(value, copy=False)
        if array.shape[:2] != lead:
            raise ValueError(f"rollout_to_tensors: {key!r} has shape {array.shape}, expected leading dims {lead}")
        if np.issubdtype(array.dtype, np.integer):
            array = array.astype(np.int64, copy=False)
        elif np.issubdtype(array.dtype, np.floating) or array.dtype == np.bool_:
            array = array.astype(np.float32, copy=False)
        else:
            raise TypeError(f"rollout_to_tensors: {key!r} has unsupported dtype {array.dtype}")
        out[key] = torch.from_numpy(np.ascontiguousarray(array)).to(device)
    return out


def flatten_rollout(data: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Merge the ``[T, N]`` leading dimensions of every tensor into one batch dimension ``T * N``
    (step-major: step 0 of every environment, then step 1...)."""
    return {key: value.reshape(value.shape[0] * value.shape[1], *value.shape[2:]) for key, value in data.items()}
