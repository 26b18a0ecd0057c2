"""Wrappers that blame the environment for what it returns wrong, before a policy fails on it:
``FiniteCheck`` (a NaN or inf observation or reward) and ``ObservationShapeCheck`` (an observation whose
shape is not its ``observation_space``'s, which gymnasium's batching reports without naming either)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import gymnasium as gym
from gymnasium.vector import VectorEnv, VectorWrapper

__all__ = ["FiniteCheck", "EnvironmentFault", "ObservationShapeCheck"]


class EnvironmentFault(RuntimeError):
    """The environment returned something no policy can use (a NaN or infinite observation or reward)."""


def _surely_finite(values: Any) -> bool:
    """A cheap test: True when ``values`` is a numpy array without NaN or inf (its float64 sum is finite, or its
    dtype cannot hold them); False means "look closer"."""
    if type(values) is not np.ndarray:
        return False
    kind = values.dtype.kind
    return kind not in "fc" or (kind == "f" and math.isfinite(values.sum(dtype=np.float64)))


class FiniteCheck(VectorWrapper):
    """Raise :class:`EnvironmentFault` when the vector env returns a NaN or infinite observation (final ones
    included) or reward, naming the environment ``name``, the sub-environment, the call and the values."""

    def __init__(self, env: VectorEnv, name: str) -> None:
        super().__init__(env)
        self.name = name
        #: ``step()`` calls so far (each steps every sub-environment once)
        self.steps = 0

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        obs, info = self.env.reset(seed=seed, options=options)
        self._check(obs, "observation", "reset()")
        return obs, info

    def step(self, actions: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self.steps += 1
        if not (_surely_finite(obs) and _surely_finite(reward)):  # else: the exact checks, which raise
            where = f"step() call {self.steps} of this process"
            self._check(obs, "observation", where)
            self._check(reward, "reward", where)
        if "final_obs" in info:
            final_obs, has_final = info["final_obs"], info.get("_final_obs")
            if final_obs is not None and has_final is not None:
                where = f"step() call {self.steps} of this process"
                for i in np.flatnonzero(has_final):
                    self._check(np.asarray(final_obs[i])[None], "final observation", where, offset=int(i))
        return obs, reward, terminated, truncated, info

    def _check(self, values: Any, what: str, where: str, offset: int = 0) -> None:
        array = np.asarray(values)
        if array.ndim == 0 or array.dtype.kind not in "fc":
            return
        finite = np.isfinite(array)
        if finite.all():
            return
        bad = int(np.flatnonzero(~finite.reshape(len(array), -1).all(axis=1))[0])  # the first sub-environment
        shown = np.array2string(array[bad], threshold=8, precision=4)
        raise EnvironmentFault(
            f"environment {self.name!r} returned a non-finite {what} in sub-environment {bad + offset} at its "
            f"{where}: {shown}; the environment produced it (not the policy): fix or wrap the environment "
            f"(e.g. clip or replace NaN in its observations)"
        )


class ObservationShapeCheck(gym.Wrapper):
    """Raise :class:`EnvironmentFault` when the environment returns an observation whose shape is not its
    ``observation_space.shape`` (if it has one), naming the environment ``name`` and both shapes."""

    def __init__(self, env: gym.Env, name: str) -> None:
        super().__init__(env)
        self.name = name
        self._shape = getattr(env.observation_space, "shape", None)

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self._check(obs, "reset()")
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._check(obs, "step()")
        return obs, reward, terminated, truncated, info

    def _check(self, obs: Any, where: str) -> None:
        shape = obs.shape if type(obs) is np.ndarray else np.shape(obs)  # the common case without np.shape's cost
        if shape == self._shape or self._shape is None:
            return
        raise EnvironmentFault(
            f"environment {self.name!r} returned an observation of shape {np.shape(obs)} from {where}, but its "
            f"observation_space is {self.env.observation_space} (shape {self._shape}); the environment produced it "
            f"(not the policy): make the observations and the observation_space agree"
        )
