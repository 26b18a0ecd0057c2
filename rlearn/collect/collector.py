"""The collector: steps a vector environment with a policy's exploration actions and returns transitions, whose
``next_obs`` is the true next observation (the final one where an episode ended). A scalar ``_forward_collect``
returns beside the action is a collect-side metric (:attr:`CollectResult.metrics`), not transition data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from rlearn.arrays import to_numpy
from rlearn.values import check_int
from rlearn.env.vector_env import check_same_step_autoreset, check_seed, derive_seed, observation_dtype
from rlearn.trace import get_tracer, span

#: transition keys the collector writes itself; a policy may not return them from ``_forward_collect``
RESERVED_KEYS = ("obs", "next_obs", "reward", "terminated", "truncated")
_RESERVED = frozenset(RESERVED_KEYS)
#: keys whose float values must be finite (what the environment receives, and what is stored as the action)
_ACTION_KEYS = frozenset(("action", "env_action"))


@dataclass
class CollectResult:
    """What one :meth:`Collector.collect` call gathered: ``transitions`` (``obs``, ``action``, every extra key
    of ``_forward_collect`` but ``env_action``, ``reward``, ``next_obs``, ``terminated``, ``truncated``; each
    ``[n_steps, num_envs, ...]``), ``episodes`` (``{episode_return, episode_length, env_index}`` of every episode
    that ended, in order), ``envstep`` (the counter after the call) and ``metrics`` (collect-side metric ->
    its values, in step order)."""

    transitions: Dict[str, np.ndarray]
    episodes: List[Dict[str, Any]] = field(default_factory=list)
    envstep: int = 0
    metrics: Dict[str, List[Any]] = field(default_factory=dict)


class Collector:
    """Collects exploration transitions from a vector env in ``AutoresetMode.SAME_STEP`` with
    ``policy._forward_collect(obs [N, ...], envstep)``: ``action [N, ...]`` (stored), optionally ``env_action``
    (sent to the environment instead) and extra per-step arrays (stored). Consecutive ``collect`` calls continue
    the same episodes; the first reset uses ``seed``, later ones :func:`~rlearn.env.vector_env.derive_seed`.
    """

    def __init__(self, env: Any, policy: Any, seed: Optional[int] = None) -> None:
        check_same_step_autoreset(env, "Collector")
        if not callable(getattr(policy, "_forward_collect", None)):
            raise TypeError(f"Collector: policy {type(policy).__name__} has no _forward_collect(obs, envstep) method")
        check_seed(seed, "Collector")
        self.env = env
        self.policy = policy
        self.seed = seed
        self.num_envs: int = int(env.num_envs)
        self.obs_dtype = observation_dtype(env.single_observation_space, "Collector")
        self.obs_shape = tuple(env.single_observation_space.shape)
        self._obs_batch_shape = (self.num_envs, *self.obs_shape)
        self._source = f"{type(policy).__name__}._forward_collect"  # what errors about its output name
        declared = getattr(policy, "monitor_vars_collect", None)
        #: keys of ``_forward_collect``'s output that are collect-side metrics, not transition data
        self.metric_keys = frozenset(declared() if callable(declared) else ())
        self._envstep = self._episode_count = self._resets = 0
        self._obs: Optional[np.ndarray] = None
        self._returns = np.zeros(self.num_envs, dtype=np.float64)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)

    @property
    def envstep(self) -> int:
        """Environment steps collected so far, summed over sub-environments."""
        return self._envstep

    def reset(self) -> np.ndarray:
        """Reset every sub-environment and return the first observation batch; partially played episodes
        are dropped, not reported (the first :meth:`collect` calls it)."""
        obs, _ = self.env.reset(seed=derive_seed(self.seed, self._resets))
        self._resets += 1
        self._obs = np.array(self._checked_obs(obs, "reset"), dtype=self.obs_dtype)
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return self._obs

    def collect(self, n_steps: int) -> CollectResult:
        """Step every sub-environment ``n_steps`` times; see :class:`CollectResult` for what comes back."""
        n_steps = check_int("Collector.collect: n_steps", n_steps)
        if get_tracer() is None:
            return self._collect(n_steps)
        with span("collector/collect", lane="collector", steps=n_steps):
            return self._collect(n_steps)

    def _collect(self, n_steps: int) -> CollectResult:
        """The collection loop: every column is written in place into an array allocated for the whole call."""
        if self._obs is None:
            self.reset()
        num_envs = self.num_envs
        # observations[t + 1] is the environment's next observation (the reset one where an episode ended: the
        # final observations are patched into next_obs at the end)
        observations = np.empty((n_steps + 1, num_envs, *self.obs_shape), dtype=self.obs_dtype)
        observations[0] = self._obs
        reward, terminated, truncated = (np.empty((n_steps, num_envs), dtype=np.float32) for _ in range(3))
        stored: Dict[str, np.ndarray] = {}  # action and the extra keys of _forward_collect, [n_steps, ...]
        layout: Optional[Dict[str, tuple]] = None
        finals: List[tuple] = []  # (step, env index, final observation) of every ended episode
        episodes: List[Dict[str, Any]] = []
        metrics: Dict[str, List[Any]] = {}
        env_step = self.env.step
        returns, lengths = self._returns, self._lengths
        t = 0
        try:
            for t in range(n_steps):
                out = self._policy_output(observations[t], metrics)
                if layout is None:
                    layout = {key: value.shape for key, value in out.items()}
                    stored = {key: np.empty((n_steps, *value.shape), dtype=value.dtype)
                              for key, value in out.items() if key != "env_action"}
                elif out.keys() != layout.keys():
                    self._check_layout(layout, out)
                for key, column in stored.items():
                    value = out[key]
                    if value.shape != layout[key] or value.dtype != column.dtype:
                        column = self._widen(stored, key, out, layout, t)
                    column[t] = value
                env_action = out.get("env_action")
                if env_action is not None and env_action.shape != layout["env_action"]:
                    self._check_layout(layout, out)
                sent = out["action"] if env_action is None else env_action
                try:
                    next_raw, step_reward, step_terminated, step_truncated, info = env_step(sent)
                except Exception as exc:
                    self._blame_action(sent, "action" if env_action is None else "env_action", exc)
                    raise
                observations[t + 1] = self._checked_obs(next_raw, "step")
                reward[t] = step_reward
                terminated[t] = step_terminated
                truncated[t] = step_truncated
                returns += step_reward  # the environment's own precision (float64 for gymnasium's)
                lengths += 1
                ended = np.logical_or(step_terminated, step_truncated)
                if ended.any():
                    self._end_episodes(t, ended, info, finals, episodes)
                self._envstep += num_envs
        except BaseException:
            # an error mid-call: keep the observation of the step that failed, as the counters do
            self._obs = observations[t].copy()
            raise

        self._obs = observations[n_steps].copy()
        next_obs = observations[1:].copy()
        for t, i, final in finals:
            next_obs[t, i] = final
        transitions = {"obs": observations[:-1], "action": stored.pop("action")}
        transitions.update(stored)
        transitions.update(reward=reward, next_obs=next_obs, terminated=terminated, truncated=truncated)
        return CollectResult(transitions=transitions, episodes=episodes, envstep=self._envstep, metrics=metrics)

    def _blame_action(self, sent: np.ndarray, key: str, exc: Exception) -> None:
        """After ``env.step`` raised: a ValueError naming ``_forward_collect`` (file:line) if an action it returned
        lies outside the action space (the likely cause); else the step's error stands."""
        space = getattr(self.env, "single_action_space", None)
        if space is None:
            return
        for i, action in enumerate(np.asarray(sent)):
            try:
                inside = space.contains(action.astype(space.dtype) if space.dtype is not None else action)
            except Exception:
                inside = False
            if not inside or (space.dtype is not None and not np.can_cast(action.dtype, space.dtype, "same_kind")):
                from rlearn.registry import defined_at

                method = getattr(type(self.policy), "_forward_collect", None)
                raise ValueError(
                    f"{self._source} ({defined_at(method)}) returned {key} {action!r} for environment {i}, outside "
                    f"its action space {space} (the step raised {type(exc).__name__}: {exc})"
                ) from exc

    def _checked_obs(self, obs: Any, where: str) -> np.ndarray:
        """The environment's observation batch as an array; a batch of the wrong shape is a ValueError."""
        if type(obs) is not np.ndarray:
            obs = np.asarray(obs)
        if obs.shape != self._obs_batch_shape:
            raise ValueError(f"Collector: env {where} returned observations of shape {obs.shape}, expected "
                             f"{self._obs_batch_shape}")
        return obs

    def _widen(self, stored: Dict[str, np.ndarray], key: str, out: Mapping[str, np.ndarray],
               layout: Mapping[str, tuple], t: int) -> np.ndarray:
        """A step whose ``key`` differs from the first step's: a shape change is an error; a dtype change
        promotes the column to the common dtype of every step (as stacking the steps would)."""
        value = out[key]
        if value.shape != layout[key]:
            self._check_layout(layout, out)
        column = stored[key]
        common = np.result_type(column.dtype, value.dtype)
        if common != column.dtype:
            widened = np.empty(column.shape, dtype=common)
            widened[:t] = column[:t]
            stored[key] = column = widened
        return column

    def _end_episodes(self, t: int, ended: np.ndarray, info: Mapping[str, Any], finals: List[tuple],
                      episodes: List[Dict[str, Any]]) -> None:
        """Note the final observation of every episode that ended at step ``t``, report the episodes and
        restart their counters."""
        final_obs, has_final = info.get("final_obs"), info.get("_final_obs")
        envs = np.flatnonzero(ended)
        for i in envs:  # all checked before any counter changes
            if final_obs is None or has_final is None or not has_final[i]:
                raise RuntimeError(
                    f"Collector: sub-environment {i} ended an episode but info['final_obs'] holds no "
                    f"final observation for it; is the env in AutoresetMode.SAME_STEP?"
                )
        for i in envs:
            finals.append((t, int(i), final_obs[i]))
            episodes.append({"episode_return": float(self._returns[i]), "episode_length": int(self._lengths[i]),
                             "env_index": int(i)})
            self._returns[i], self._lengths[i] = 0.0, 0
            self._episode_count += 1

    def _policy_output(self, obs: np.ndarray, metrics: Dict[str, List[Any]]) -> Dict[str, np.ndarray]:
        """``_forward_collect``'s checked arrays (maybe the policy's own: the caller copies what it keeps);
        collect-side metrics go to ``metrics`` instead."""
        out = self.policy._forward_collect(obs, self._envstep)
        if type(out) is not dict and not isinstance(out, Mapping):  # the dict test first: it is cheaper
            raise TypeError(f"{self._source} must return a dict with an 'action' entry, got {type(out).__name__}")
        if "action" not in out:
            raise ValueError(f"{self._source} returned no 'action' (keys: {sorted(map(str, out))})")
        if not _RESERVED.isdisjoint(out):
            raise ValueError(f"{self._source} returned reserved key(s) {sorted(_RESERVED.intersection(out))}; the "
                             "collector writes those itself")
        arrays: Dict[str, np.ndarray] = {}
        for key, value in out.items():
            cls = type(value)
            if cls is float or cls is int or cls is bool:  # a Python number: a collect-side metric (or an error)
                if key not in _ACTION_KEYS and type(key) is str:
                    metrics.setdefault(key, []).append(value)
                    continue
            array = self._checked_array(key, value, metrics)
            if array is not None:
                arrays[key] = array
        return arrays

    def _checked_array(self, key: Any, value: Any, metrics: Dict[str, List[Any]]) -> Any:
        """``value`` as a checked numpy array, or None after appending a collect-side metric to ``metrics``."""
        if not isinstance(key, str):
            raise TypeError(f"{self._source} returned a non-string key {key!r}")
        array = value if type(value) is np.ndarray else to_numpy(value, copy=False)
        if array.dtype == object:
            raise TypeError(f"{self._source} returned {key!r} as an object array; return numbers")
        if key in self.metric_keys or (array.ndim == 0 and key not in _ACTION_KEYS):
            if array.size != 1 or array.dtype.kind not in "biuf":
                raise ValueError(f"{self._source} returned the collect-side metric {key!r} as {array.dtype} of shape "
                                 f"{array.shape}; a metric is one number per step (declared in _monitor_vars_collect)")
            metrics.setdefault(key, []).append(array.reshape(()).item())
            return None
        if array.ndim == 0 or array.shape[0] != self.num_envs:
            raise ValueError(f"{self._source} returned {key!r} with shape {array.shape}; expected a leading dimension "
                             f"of num_envs={self.num_envs}")
        if array.dtype.kind == "f" and key in _ACTION_KEYS and not np.isfinite(array).all():
            raise ValueError(f"{self._source} returned a non-finite {key!r}: {array.tolist()}")
        return array

    def _check_layout(self, layout: Mapping[str, tuple], out: Mapping[str, np.ndarray]) -> None:
        if set(out) != set(layout):
            raise ValueError(f"{self._source} returned keys {sorted(out)} but {sorted(layout)} earlier in the same "
                             "collect call; the keys must not change between steps")
        for key, shape in layout.items():
            if out[key].shape != shape:
                raise ValueError(f"{self._source} returned {key!r} with shape {out[key].shape}, {shape} earlier in "
                                 "the same collect call")

    def state_dict(self) -> Dict[str, int]:
        """Counters a resumed run continues: ``envstep``, ``episode_count`` and ``resets``. The environments
        are not saved: after :meth:`load_state_dict` the next :meth:`collect` starts fresh episodes."""
        return {"envstep": self._envstep, "episode_count": self._episode_count, "resets": self._resets}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; a missing, unknown or non-integer entry is a ``ValueError``."""
        values = load_counters(state, "Collector", ("envstep", "episode_count", "resets"))
        self._envstep, self._episode_count, self._resets = values["envstep"], values["episode_count"], values["resets"]
        self._obs = None  # the next collect resets: fresh episodes


def load_counters(state: Any, owner: str, keys: Sequence[str]) -> Dict[str, int]:
    """The counters ``keys`` of a saved ``state`` as ints; anything but exactly those keys holding
    non-negative ints is a ``ValueError`` naming ``owner``."""
    where = f"{owner}.load_state_dict"
    if not isinstance(state, Mapping) or set(state) != set(keys):
        got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(f"{where}: expected keys {sorted(keys)}, got {got}")
    return {key: check_int(f"{where}: {key!r}", state[key], 0) for key in keys}
