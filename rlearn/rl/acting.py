"""What policies share at the environment's edge: acting from numpy (:func:`obs_tensor`, :func:`forward_numpy`,
:func:`host_columns`), ``Box`` actions in normalised units (:class:`BoxActions`), :func:`box_observation_shape`,
and for PPO and PPG :func:`action_spec` and :func:`sample_categorical` (inverse-CDF sampling, own generator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
from gymnasium import spaces

__all__ = ["obs_tensor", "forward_numpy", "host_columns", "BoxActions", "box_observation_shape", "ActionSpec",
           "action_spec", "sample_categorical"]


def obs_tensor(obs: Any, device: torch.device) -> torch.Tensor:
    """``obs [N, *obs_shape]`` as a float32 tensor ``[N, obs_dim]`` on ``device`` (sharing a C-contiguous float32
    array's memory on the CPU)."""
    if type(obs) is np.ndarray and obs.dtype == np.float32 and obs.flags.c_contiguous and device.type == "cpu":
        tensor = torch.from_numpy(obs)
    else:
        tensor = torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=device)
    return tensor.reshape(len(obs), -1)


def forward_numpy(net: torch.nn.Module, obs: Any, device: torch.device) -> np.ndarray:
    """``net(obs)`` without gradient as float64 ``[N, ...]``; a tuple of outputs is concatenated along the last
    dimension (one device-to-host copy)."""
    with torch.no_grad():
        out = net(obs_tensor(obs, device))
        if isinstance(out, tuple):
            out = torch.cat(out, dim=-1)
    return out.cpu().numpy().astype(np.float64)


def host_columns(**columns: torch.Tensor) -> Dict[str, np.ndarray]:
    """Per-row tensors (``[N]`` or ``[N, k]``) copied to the host in one transfer, by name, as float32 arrays."""
    parts = [column.unsqueeze(-1) if column.dim() == 1 else column for column in columns.values()]
    host = torch.cat([part.float() for part in parts], dim=-1).cpu().numpy()
    out: Dict[str, np.ndarray] = {}
    start = 0
    for (name, column), part in zip(columns.items(), parts):
        block = host[:, start:start + part.shape[-1]]
        out[name] = (block[:, 0] if column.dim() == 1 else block).copy()
        start += part.shape[-1]
    return out


def box_observation_shape(space: Any, owner: str) -> Tuple[int, ...]:
    """The shape of a ``Box`` observation space; any other space is a TypeError naming ``owner``."""
    if not isinstance(space, spaces.Box):
        raise TypeError(f"{owner} needs a Box observation space, got {space!r}")
    return tuple(space.shape)


class BoxActions:
    """A ``Box`` action space (``low`` / ``high`` float64 ``[dim]``, ``shape``, ``dim``) mapped affinely onto
    ``[-1, 1]`` per dimension; another space, or bounds not finite with ``high > low``, is an error naming
    ``owner``."""

    def __init__(self, space: Any, owner: str) -> None:
        if not isinstance(space, spaces.Box):
            raise TypeError(f"{owner} needs a continuous (Box) action space, got {space!r}")
        low = np.asarray(space.low, dtype=np.float64).reshape(-1)
        high = np.asarray(space.high, dtype=np.float64).reshape(-1)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
            raise ValueError(f"{owner} needs finite action bounds with high > low in every dimension, got {space!r}")
        self.low, self.high = low, high
        self.shape: Tuple[int, ...] = tuple(space.shape)
        self.dim = int(low.size)
        self.dtype = space.dtype
        self._scale, self._center = (high - low) / 2.0, (high + low) / 2.0

    def to_env(self, action: np.ndarray) -> np.ndarray:
        """Normalised actions ``[N, dim]`` in ``[-1, 1]`` -> environment units ``[N, *shape]`` (clipped to the
        bounds, in the space's dtype)."""
        action = np.asarray(action, dtype=np.float64).reshape(len(action), self.dim)
        env_action = (self._center + self._scale * action).clip(self.low, self.high)
        return env_action.astype(self.dtype).reshape(len(action), *self.shape)

    def to_normalized(self, env_action: np.ndarray) -> np.ndarray:
        """Environment units ``[N, *shape]`` -> normalised float32 ``[N, *shape]`` in ``[-1, 1]``."""
        env_action = np.asarray(env_action, dtype=np.float64).reshape(len(env_action), self.dim)
        return ((env_action - self._center) / self._scale).astype(np.float32).reshape(len(env_action), *self.shape)


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
