"""Collector: exact transitions at episode boundaries (terminated and truncated), across collect calls,
sync and async, against a per-environment sequential reference; envstep; policy-output checks; state.

This module does not import torch at the top: asynchronous workers import it to unpickle the test envs.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlearn.collect import CollectResult, Collector
from rlearn.env import derive_seed, make_vector_env, register_env


# ------------------------------------------------------------------------------------------ test envs
class CounterEnv(gym.Env):
    """obs = [t, u]: t = steps since reset, u = a number drawn at reset from the env's seeded generator.
    reward = t after the step. Terminates when t reaches ``terminate_at`` (``None``: never)."""

    def __init__(self, terminate_at=3):
        self.observation_space = spaces.Box(np.array([0.0, 0.0], np.float32), np.array([1e6, 1.0], np.float32))
        self.action_space = spaces.Discrete(2)
        self.terminate_at = terminate_at

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.u = 0, float(self.np_random.random())
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t, self.u], np.float32)

    def step(self, action):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return self._obs(), float(self.t), terminated, False, {}


class RandomLengthEnv(gym.Env):
    """Episodes of a random length 1..4 (drawn at reset), random rewards; obs = [t, length]."""

    observation_space = spaces.Box(0.0, 10.0, (2,), np.float32)
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(1, 5))
        return np.array([self.t, self.length], np.float32), {}

    def step(self, action):
        self.t += 1
        reward = float(self.np_random.normal()) + int(action)
        return np.array([self.t, self.length], np.float32), reward, self.t >= self.length, False, {}


register_env("RLearnTestCol/Terminate3-v0", CounterEnv, kwargs={"terminate_at": 3}, override=True)
register_env("RLearnTestCol/Truncate4-v0", CounterEnv, kwargs={"terminate_at": None}, max_episode_steps=4, override=True)
register_env("RLearnTestCol/RandomLength-v0", RandomLengthEnv, override=True)


# ------------------------------------------------------------------------------------------- policies
class ScriptedPolicy:
    """Deterministic actions ``action_fn(k, i, obs_i)`` for env ``i`` at vector step ``k`` (= envstep / N),
    an extra per-step key ``value`` and a 2-d extra key ``feat``. Records the envstep of every call."""

    def __init__(self, action_fn=None, env_action_fn=None):
        self.action_fn = action_fn or (lambda k, i, obs: 0)
        self.env_action_fn = env_action_fn
        self.envsteps = []

    def _forward_collect(self, obs, envstep):
        self.envsteps.append(envstep)
        n = obs.shape[0]
        k = envstep // n
        action = np.array([self.action_fn(k, i, obs[i]) for i in range(n)])
        out = {
            "action": action,
            "value": np.arange(n, dtype=np.float32) + k,
            "feat": np.full((n, 2), k, dtype=np.int64),
        }
        if self.env_action_fn is not None:
            out["env_action"] = self.env_action_fn(action)
        return out


# ----------------------------------------------------------------------------- exact boundaries
@pytest.mark.parametrize("asynchronous", [False, True])
def test_terminated_boundary_exact_across_collect_calls(asynchronous):
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2, asynchronous=asynchronous)
    try:
        collector = Collector(env, ScriptedPolicy(), seed=7)
        first = collector.collect(2)
        second = collector.collect(3)
    finally:
        env.close()
    u = [CounterEnv().reset(seed=7 + i)[0][1] for i in range(2)]  # collector's first reset: seed + i
    t1, t2 = first.transitions, second.transitions
    assert t1["obs"][..., 0].tolist() == [[0, 0], [1, 1]]
    assert t1["next_obs"][..., 0].tolist() == [[1, 1], [2, 2]]
    assert first.episodes == []
    # the episode ends on the first step of the second call: next_obs is the final obs (t=3, same u),
    # and the following step starts from the reset obs (t=0, a new u)
    assert t2["obs"][..., 0].tolist() == [[2, 2], [0, 0], [1, 1]]
    assert t2["next_obs"][..., 0].tolist() == [[3, 3], [1, 1], [2, 2]]
    assert t2["terminated"].tolist() == [[1, 1], [0, 0], [0, 0]]
    assert t2["truncated"].tolist() == [[0, 0], [0, 0], [0, 0]]
    assert t2["reward"].tolist() == [[3, 3], [1, 1], [2, 2]]
    np.testing.assert_array_equal(t2["next_obs"][0, :, 1], np.array(u, np.float32))
    assert not np.isin(t2["obs"][1, :, 1], np.array(u, np.float32)).any()
    np.testing.assert_array_equal(t2["obs"][2], t2["next_obs"][1])
    # return accumulated across the call boundary: 1 + 2 + 3
    assert second.episodes == [
        {"episode_return": 6.0, "episode_length": 3, "env_index": 0},
        {"episode_return": 6.0, "episode_length": 3, "env_index": 1},
    ]
    assert collector.envstep == 10 and second.envstep == 10 and collector.state_dict()["episode_count"] == 2


@pytest.mark.parametrize("asynchronous", [False, True])
def test_truncated_boundary_exact(asynchronous):
    env = make_vector_env("RLearnTestCol/Truncate4-v0", 2, asynchronous=asynchronous)
    try:
        collector = Collector(env, ScriptedPolicy(), seed=0)
        result = collector.collect(6)
    finally:
        env.close()
    tr = result.transitions
    assert tr["obs"][:, 0, 0].tolist() == [0, 1, 2, 3, 0, 1]
    assert tr["next_obs"][:, 0, 0].tolist() == [1, 2, 3, 4, 1, 2]  # 4 = the final obs of the truncated episode
    assert tr["truncated"][:, 0].tolist() == [0, 0, 0, 1, 0, 0]
    assert tr["terminated"].sum() == 0
    assert tr["next_obs"][3, 0, 1] == tr["obs"][3, 0, 1] != tr["obs"][4, 0, 1]  # final obs: old episode's u
    assert result.episodes == [
        {"episode_return": 10.0, "episode_length": 4, "env_index": 0},
        {"episode_return": 10.0, "episode_length": 4, "env_index": 1},
    ]


def test_transition_layout_and_dtypes():
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 3)
    try:
        result = Collector(env, ScriptedPolicy(), seed=1).collect(4)
    finally:
        env.close()
    tr = result.transitions
    assert list(tr) == ["obs", "action", "value", "feat", "reward", "next_obs", "terminated", "truncated"]
    assert tr["obs"].shape == tr["next_obs"].shape == (4, 3, 2) and tr["obs"].dtype == np.float32
    assert tr["action"].shape == (4, 3) and tr["feat"].shape == (4, 3, 2) and tr["feat"].dtype == np.int64
    for key in ("reward", "terminated", "truncated", "value"):
        assert tr[key].shape == (4, 3) and tr[key].dtype == np.float32, key
    assert tr["value"][:, 2].tolist() == [2, 3, 4, 5]  # extra keys stored per step
    assert result.transitions["reward"].shape == (4, 3) and isinstance(result, CollectResult)


# --------------------------------------------------------------------- sequential reference
def reference(env_id, env_kwargs, seed, num_envs, n_steps, action_fn, env_action_fn=None):
    """Each sub-environment played on its own, one step at a time, by the obvious loop."""
    per_env, episodes = [], []
    for i in range(num_envs):
        env = gym.make(env_id, **env_kwargs)
        obs, _ = env.reset(seed=seed + i)
        rows, ret, length = [], 0.0, 0
        for k in range(n_steps):
            action = action_fn(k, i, obs)
            sent = action if env_action_fn is None else env_action_fn(action)
            nxt, reward, terminated, truncated, _ = env.step(sent)
            rows.append((obs, action, reward, nxt, terminated, truncated))
            ret, length = ret + reward, length + 1
            if terminated or truncated:
                episodes.append((k, i, ret, length))
                ret, length = 0.0, 0
                obs, _ = env.reset()
            else:
                obs = nxt
        per_env.append(rows)
        env.close()
    columns = {}
    for j, key in enumerate(("obs", "action", "reward", "next_obs", "terminated", "truncated")):
        columns[key] = np.stack([np.stack([np.asarray(per_env[i][k][j]) for i in range(num_envs)]) for k in range(n_steps)])
    episodes.sort()
    return columns, [{"episode_return": r, "episode_length": n, "env_index": i} for _, i, r, n in episodes]


def pendulum_action(k, i, obs):
    return np.array([3.0 * np.sin(0.7 * k + i)], np.float32)  # outside [-2, 2] half the time


CASES = {
    "random-length": ("RLearnTestCol/RandomLength-v0", {}, lambda k, i, obs: (k + 2 * i) % 3, None),
    "cartpole": ("CartPole-v1", {}, lambda k, i, obs: int(i % 2 == 0 or k % 5 == 0), None),
    "frozenlake-discrete-obs": ("FrozenLake-v1", {"max_episode_steps": 6}, lambda k, i, obs: (k + i) % 4, None),
    "pendulum-truncated-clipped": (
        "Pendulum-v1", {"max_episode_steps": 5}, pendulum_action, lambda a: np.clip(a, -2.0, 2.0).astype(np.float32)
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_sequential_reference(case):
    env_id, kwargs, action_fn, env_action_fn = CASES[case]
    num_envs, seed, splits = 3, 12, (5, 1, 17)
    env = make_vector_env(env_id, num_envs, env_kwargs=kwargs)
    try:
        collector = Collector(env, ScriptedPolicy(action_fn, env_action_fn), seed=seed)
        results = [collector.collect(n) for n in splits]
    finally:
        env.close()
    want, want_episodes = reference(env_id, kwargs, seed, num_envs, sum(splits), action_fn, env_action_fn)
    got = {key: np.concatenate([r.transitions[key] for r in results]) for key in want}
    obs_dtype = np.int64 if case.startswith("frozenlake") else np.float32
    assert got["obs"].dtype == got["next_obs"].dtype == obs_dtype
    for key in want:
        np.testing.assert_allclose(got[key], want[key].astype(got[key].dtype), rtol=1e-6, atol=0, err_msg=key)
    episodes = [e for r in results for e in r.episodes]
    assert [(e["env_index"], e["episode_length"]) for e in episodes] == [
        (e["env_index"], e["episode_length"]) for e in want_episodes
    ]
    np.testing.assert_allclose([e["episode_return"] for e in episodes], [e["episode_return"] for e in want_episodes], rtol=1e-12)
    assert len(episodes) >= 3, "the case should exercise episode boundaries"
    assert (got["terminated"] + got["truncated"]).sum() == len(episodes)
    if case.startswith("pendulum"):
        assert np.abs(got["action"]).max() > 2.0  # the policy's action is stored, the env got the clipped one
        assert got["truncated"].sum() == len(episodes) and got["terminated"].sum() == 0


# ------------------------------------------------------------------------------------------ envstep
def test_envstep_counts_steps_summed_over_envs():
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 4)
    policy = ScriptedPolicy()
    try:
        collector = Collector(env, policy)
        assert collector.envstep == 0
        collector.collect(3)
        result = collector.collect(2)
    finally:
        env.close()
    assert policy.envsteps == [0, 4, 8, 12, 16]
    assert collector.envstep == result.envstep == 20


def test_seeded_make_vector_env_with_unseeded_collector_is_reproducible():
    runs = []
    for _ in range(2):
        env = make_vector_env("RLearnTestCol/RandomLength-v0", 2, seed=3)
        try:
            runs.append(Collector(env, ScriptedPolicy(lambda k, i, o: k % 3)).collect(10).transitions)
        finally:
            env.close()
    for key in runs[0]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key])


# --------------------------------------------------------------------------- policy output checks
class Returning:
    def __init__(self, fn):
        self.fn = fn

    def _forward_collect(self, obs, envstep):
        return self.fn(obs.shape[0], envstep)


class NoActionPolicy(Returning):
    pass


@pytest.mark.parametrize(
    "fn, error, match",
    [
        (lambda n, s: {"value": np.zeros(n)}, ValueError, r"NoActionPolicy\._forward_collect returned no 'action'"),
        (lambda n, s: [0] * n, TypeError, r"NoActionPolicy\._forward_collect must return a dict"),
        (lambda n, s: {"action": np.zeros(n + 1)}, ValueError, r"returned 'action' with shape \(3,\); expected a leading dimension of num_envs=2"),
        (lambda n, s: {"action": 0}, ValueError, r"returned 'action' with shape \(\)"),
        (lambda n, s: {"action": np.zeros(n), "log_prob": np.zeros(1)}, ValueError, r"'log_prob' with shape \(1,\)"),
        (lambda n, s: {"action": np.zeros(n), "reward": np.zeros(n)}, ValueError, r"reserved key\(s\) \['reward'\]"),
        (lambda n, s: {"action": np.array([np.nan, 0.0])}, ValueError, r"non-finite 'action'"),
        (lambda n, s: {"action": np.zeros(n), "env_action": np.array([np.inf, 0.0])}, ValueError, r"non-finite 'env_action'"),
        (lambda n, s: {"action": np.array([object(), object()])}, TypeError, r"'action' as an object array"),
        (lambda n, s: {"action": np.zeros(n, np.int64), "x": np.zeros(n) if s == 0 else np.zeros((n, 2))}, ValueError,
         r"'x' with shape \(2, 2\), \(2,\) earlier in the same collect call"),
        (lambda n, s: {"action": np.zeros(n, np.int64), **({"x": np.zeros(n)} if s == 0 else {})}, ValueError,
         r"keys must not change between steps"),
    ],
)
def test_bad_policy_output_names_the_policy(fn, error, match):
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2)
    try:
        collector = Collector(env, NoActionPolicy(fn), seed=0)
        with pytest.raises(error, match=match):
            collector.collect(3)
    finally:
        env.close()


def test_constructor_and_argument_checks():
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 1)
    try:
        with pytest.raises(TypeError, match="policy object has no _forward_collect"):
            Collector(env, object())
        with pytest.raises(ValueError, match="seed must be a non-negative int"):
            Collector(env, ScriptedPolicy(), seed=-3)
        collector = Collector(env, ScriptedPolicy())
        for bad in (0, -1, 2.0, True):
            with pytest.raises(ValueError, match="n_steps must be a positive int"):
                collector.collect(bad)
    finally:
        env.close()
    next_step = gym.make_vec("CartPole-v1", 1, vectorization_mode="sync")
    with pytest.raises(ValueError, match="AutoresetMode.SAME_STEP"):
        Collector(next_step, ScriptedPolicy())
    next_step.close()


def test_torch_tensor_outputs_are_converted():
    torch = pytest.importorskip("torch")

    class TorchPolicy:
        def _forward_collect(self, obs, envstep):
            return {"action": torch.zeros(obs.shape[0], dtype=torch.long), "log_prob": torch.full((obs.shape[0],), -0.5)}

    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2)
    try:
        tr = Collector(env, TorchPolicy(), seed=0).collect(2).transitions
    finally:
        env.close()
    assert tr["action"].dtype == np.int64 and tr["log_prob"].tolist() == [[-0.5, -0.5], [-0.5, -0.5]]


# --------------------------------------------------------------------------------------------- state
def test_state_dict_round_trip_resumes_counters_with_fresh_episodes():
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2)
    try:
        collector = Collector(env, ScriptedPolicy(), seed=4)
        collector.collect(5)  # one episode each, the second one 2 steps in
        state = collector.state_dict()
    finally:
        env.close()
    assert state == {"envstep": 10, "episode_count": 2, "resets": 1}

    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2)
    try:
        resumed = Collector(env, ScriptedPolicy(), seed=4)
        resumed.load_state_dict(state)
        assert resumed.envstep == 10 and resumed.state_dict()["episode_count"] == 2
        result = resumed.collect(3)
    finally:
        env.close()
    tr = result.transitions
    assert tr["obs"][0, :, 0].tolist() == [0, 0]  # fresh episodes, not the unfinished ones
    reseed = derive_seed(4, 1)  # not a replay of the first run's initial states
    assert tr["obs"][0, :, 1].tolist() == [CounterEnv().reset(seed=reseed + i)[0][1] for i in range(2)]
    assert result.episodes == [{"episode_return": 6.0, "episode_length": 3, "env_index": i} for i in range(2)]
    assert resumed.envstep == 16 and resumed.state_dict()["episode_count"] == 4
    assert resumed.state_dict() == {"envstep": 16, "episode_count": 4, "resets": 2}


@pytest.mark.parametrize(
    "state, match",
    [
        ({"envstep": 1, "episode_count": 0}, "expected keys"),
        ({"envstep": 1, "episode_count": 0, "resets": 0, "extra": 1}, "expected keys"),
        ({"envstep": -1, "episode_count": 0, "resets": 0}, "'envstep' must be an int >= 0"),
        ({"envstep": 1.5, "episode_count": 0, "resets": 0}, "'envstep' must be an int >= 0"),
        ([1, 2, 3], "expected keys"),
    ],
)
def test_load_state_dict_rejects_bad_state_and_keeps_counters(state, match):
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 1)
    try:
        collector = Collector(env, ScriptedPolicy(), seed=0)
        collector.collect(2)
        with pytest.raises(ValueError, match=match):
            collector.load_state_dict(state)
        assert collector.state_dict() == {"envstep": 2, "episode_count": 0, "resets": 1}
        assert collector.collect(1).transitions["obs"][0, 0, 0] == 2  # the live episode continues
    finally:
        env.close()


def test_loading_state_mid_episode_drops_the_partial_returns():
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 1)
    try:
        collector = Collector(env, ScriptedPolicy(), seed=0)
        collector.collect(2)  # an unfinished episode with return 1 + 2
        collector.load_state_dict({"envstep": 100, "episode_count": 5, "resets": 1})
        result = collector.collect(3)
    finally:
        env.close()
    assert result.transitions["obs"][:, 0, 0].tolist() == [0, 1, 2]
    assert result.episodes == [{"episode_return": 6.0, "episode_length": 3, "env_index": 0}]
    assert collector.envstep == 103 and collector.state_dict()["episode_count"] == 6


def test_collect_is_a_trace_span_when_tracing_is_on(tmp_path, monkeypatch):
    from rlearn import trace

    monkeypatch.delenv(trace.ENV_VAR, raising=False)
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2)
    trace.enable(tmp_path)
    try:
        collector = Collector(env, ScriptedPolicy(), seed=0)
        collector.collect(3)
        collector.collect(1)
    finally:
        trace.disable()
        env.close()
    spans = [s for session in trace.read_records(trace.records_path(tmp_path, 0)).sessions for s in session.spans]
    collect = [s for s in spans if s["name"] == "collector/collect"]
    assert len(collect) == 2 and {s["lane"] for s in collect} == {"collector"}
    assert [s["args"]["steps"] for s in collect] == [3, 1]


# ------------------------------------------------------------------------------ collect-side metrics
class EpsilonPolicy(ScriptedPolicy):
    """ScriptedPolicy plus a declared collect-side metric ``epsilon`` = vector step k, reported on even
    steps only (sparse), as a Python float, a 0-d numpy array or a one-element array in turn; and, with
    ``undeclared``, a 0-d ``temperature`` it does not declare."""

    def __init__(self, undeclared=False):
        super().__init__()
        self.undeclared = undeclared

    def monitor_vars_collect(self):
        return ["epsilon"]

    def _forward_collect(self, obs, envstep):
        out = super()._forward_collect(obs, envstep)
        k = envstep // obs.shape[0]
        if k % 2 == 0:
            out["epsilon"] = [float(k), np.array(float(k)), np.array([float(k)])][(k // 2) % 3]
        if self.undeclared:
            out["temperature"] = np.float32(0.5)
        return out


def test_collect_side_metrics_leave_the_transitions():
    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2)
    try:
        collector = Collector(env, EpsilonPolicy(undeclared=True), seed=0)
        assert collector.metric_keys == frozenset({"epsilon"})
        first = collector.collect(5)
        second = collector.collect(1)  # step 5: odd, no epsilon at all
        third = collector.collect(2)
    finally:
        env.close()
    assert first.metrics == {"epsilon": [0.0, 2.0, 4.0], "temperature": [0.5] * 5}
    assert all(type(v) is float for v in first.metrics["epsilon"])
    assert second.metrics == {"temperature": [0.5]}
    assert third.metrics == {"epsilon": [6.0], "temperature": [0.5, 0.5]}
    assert "epsilon" not in first.transitions and "temperature" not in first.transitions
    assert set(first.transitions) == {"obs", "action", "value", "feat", "reward", "next_obs", "terminated", "truncated"}
    assert first.transitions["value"].shape == (5, 2)


@pytest.mark.parametrize("bad, match", [
    (np.zeros(2), r"collect-side metric 'epsilon' as float64 of shape \(2,\)"),
    (np.array(["x"]), r"collect-side metric 'epsilon' as <U1 of shape \(1,\)"),
])
def test_collect_side_metric_must_be_one_number(bad, match):
    class Bad(EpsilonPolicy):
        def _forward_collect(self, obs, envstep):
            return {"action": np.zeros(obs.shape[0], np.int64), "epsilon": bad}

    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2)
    try:
        with pytest.raises(ValueError, match=match):
            Collector(env, Bad(), seed=0).collect(1)
    finally:
        env.close()


# ------------------------------------------------------------------------ in-place columns (fast path)
def test_a_key_whose_dtype_changes_is_promoted_as_stacking_would():
    """Columns are allocated at the first step's dtype; a later step with a wider dtype promotes the whole
    column (np.stack's result), and a narrower one is stored in the wider column."""
    class Widening(ScriptedPolicy):
        def _forward_collect(self, obs, envstep):
            out = super()._forward_collect(obs, envstep)
            k = envstep // obs.shape[0]
            out["value"] = np.full(obs.shape[0], k + 0.25, dtype=np.float32 if k == 0 else np.float64)
            out["action"] = np.zeros(obs.shape[0], np.int32 if k < 2 else np.int64)
            return out

    env = make_vector_env("RLearnTestCol/Terminate3-v0", 2)
    try:
        tr = Collector(env, Widening(), seed=0).collect(4).transitions
    finally:
        env.close()
    assert tr["value"].dtype == np.float64 and tr["value"][:, 0].tolist() == [0.25, 1.25, 2.25, 3.25]
    assert tr["action"].dtype == np.int64 and tr["feat"].dtype == np.int64


def test_an_error_mid_call_keeps_the_observation_of_the_failed_step():
    """A policy error at step 2 of a call: the counters count 2 steps, and the next call continues from the
    observation the failing step was given (the environment's state), as before the in-place columns."""
    class FailOnce(ScriptedPolicy):
        fail = True

        def _forward_collect(self, obs, envstep):
            if envstep == 4 and self.fail:
                self.fail = False
                raise RuntimeError("boom")
            return super()._forward_collect(obs, envstep)

    env = make_vector_env("RLearnTestCol/Truncate4-v0", 2)
    try:
        collector = Collector(env, FailOnce(), seed=0)
        with pytest.raises(RuntimeError, match="boom"):
            collector.collect(5)
        assert collector.envstep == 4
        tr = collector.collect(3).transitions
    finally:
        env.close()
    assert tr["obs"][:, 0, 0].tolist() == [2, 3, 0]  # t = 2, 3, then the reset after truncation at 4
    assert tr["next_obs"][:, 0, 0].tolist() == [3, 4, 1]  # the true next observation, the final one at t = 4
    assert tr["truncated"][:, 0].tolist() == [0, 1, 0]
