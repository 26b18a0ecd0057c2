"""The evaluator: exactly ``n_episodes`` complete episodes with the deterministic policy, summarised. Each
sub-environment contributes its *first* episodes up to a fixed quota: stopping at the first ``n_episodes`` to
finish anywhere would over-represent short episodes.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from rlearn.arrays import to_numpy
from rlearn.collect.collector import load_counters
from rlearn.env.vector_env import check_same_step_autoreset, check_seed, derive_seed, observation_dtype
from rlearn.values import check_int


class Evaluator:
    """Runs ``policy._forward_eval(obs [N, ...]) -> actions [N, ...]`` on its own vector env (``SAME_STEP``
    autoreset) for exactly ``n_episodes`` episodes. Evaluation ``k`` resets with ``derive_seed(seed, k)``, so
    evaluators built alike give identical results; reaching ``max_steps`` vector steps is a ``RuntimeError``."""

    def __init__(self, env: Any, policy: Any, n_episodes: int, seed: Optional[int] = None,
                 max_steps: Optional[int] = None) -> None:
        check_same_step_autoreset(env, "Evaluator")
        if not callable(getattr(policy, "_forward_eval", None)):
            raise TypeError(f"Evaluator: policy {type(policy).__name__} has no _forward_eval(obs) method")
        self.n_episodes = check_int("Evaluator: n_episodes", n_episodes)
        check_seed(seed, "Evaluator")
        self.max_steps = check_int("Evaluator: max_steps", max_steps, optional=True)
        self.env, self.policy, self.seed = env, policy, seed
        self.num_envs: int = int(env.num_envs)
        self.obs_dtype = observation_dtype(env.single_observation_space, "Evaluator")
        self._evaluations = 0
        #: the episodes of the last evaluation, ``{episode_return, episode_length, env_index}``, by env index
        self.episodes: List[Dict[str, Any]] = []

    @property
    def quotas(self) -> List[int]:
        """Episodes each sub-environment contributes to one evaluation."""
        base, extra = divmod(self.n_episodes, self.num_envs)
        return [base + (1 if i < extra else 0) for i in range(self.num_envs)]

    @property
    def evaluations(self) -> int:
        """Evaluations run so far (the index of the next one's seed)."""
        return self._evaluations

    def evaluate(self) -> Dict[str, float]:
        """Play ``n_episodes`` episodes; returns ``episode_return_mean``, ``episode_return_std`` (``ddof=0``),
        ``episode_return_min``, ``episode_return_max``, ``episode_length_mean`` and ``episodes`` (Python numbers)."""
        name = type(self.policy).__name__
        quotas = self.quotas
        done: List[List[Dict[str, Any]]] = [[] for _ in range(self.num_envs)]
        returns, lengths = np.zeros(self.num_envs, dtype=np.float64), np.zeros(self.num_envs, dtype=np.int64)
        obs, _ = self.env.reset(seed=derive_seed(self.seed, self._evaluations))
        self._evaluations += 1
        steps = 0
        while any(len(done[i]) < quotas[i] for i in range(self.num_envs)):
            if self.max_steps is not None and steps >= self.max_steps:
                raise RuntimeError(f"Evaluator: {sum(map(len, done))} of {self.n_episodes} episodes finished within "
                                   f"max_steps={self.max_steps} vector steps; does the environment have a time limit?")
            actions = to_numpy(self.policy._forward_eval(np.asarray(obs, dtype=self.obs_dtype)), copy=False)
            if actions.ndim == 0 or actions.shape[0] != self.num_envs:
                raise ValueError(f"{name}._forward_eval returned actions of shape {actions.shape}; expected a leading "
                                 f"dimension of num_envs={self.num_envs}")
            if np.issubdtype(actions.dtype, np.floating) and not np.isfinite(actions).all():
                raise ValueError(f"{name}._forward_eval returned non-finite actions: {actions.tolist()}")
            obs, reward, terminated, truncated, _ = self.env.step(actions)
            steps += 1
            returns += np.asarray(reward, dtype=np.float64)
            lengths += 1
            for i in np.flatnonzero(np.logical_or(terminated, truncated)):
                if len(done[i]) < quotas[i]:  # episodes beyond the quota are ignored
                    done[i].append(
                        {"episode_return": float(returns[i]), "episode_length": int(lengths[i]), "env_index": int(i)}
                    )
                returns[i], lengths[i] = 0.0, 0
        self.episodes = [episode for per_env in done for episode in per_env]
        ret = np.array([e["episode_return"] for e in self.episodes], dtype=np.float64)
        length = np.array([e["episode_length"] for e in self.episodes], dtype=np.float64)
        return {"episode_return_mean": float(ret.mean()), "episode_return_std": float(ret.std()),
                "episode_return_min": float(ret.min()), "episode_return_max": float(ret.max()),
                "episode_length_mean": float(length.mean()), "episodes": len(self.episodes)}

    def state_dict(self) -> Dict[str, int]:
        """The evaluation counter, so a resumed run continues the sequence of evaluation seeds."""
        return {"evaluations": self._evaluations}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; anything but ``{'evaluations': int >= 0}`` is a ``ValueError``."""
        self._evaluations = load_counters(state, "Evaluator", ("evaluations",))["evaluations"]
