"""Evaluator: exact episode counts per environment (quotas), no short-episode bias, reproducible seeds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlearn.collect import Evaluator
from rlearn.env import derive_seed, make_vector_env, register_env


class DiceEnv(gym.Env):
    """Episode length drawn at reset (1..6); reward 1 per step, so return == length. obs = [t, length]."""

    observation_space = spaces.Box(0.0, 10.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(1, 7))
        return np.array([0, self.length], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t, self.length], np.float32), 1.0, self.t >= self.length, False, {}


class EndlessEnv(DiceEnv):
    def step(self, action):
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, False, truncated, info


register_env("RLearnTestEval/Dice-v0", DiceEnv, override=True)
register_env("RLearnTestEval/Endless-v0", EndlessEnv, override=True)


class ConstantPolicy:
    def __init__(self, action=0):
        self.action = action
        self.calls = 0

    def _forward_eval(self, obs):
        self.calls += 1
        return np.full(obs.shape[0], self.action)


def reference_episodes(seed, num_envs, quotas):
    """Each sub-environment on its own: its first quota[i] episodes after a reset with seed + i."""
    out = []
    for i in range(num_envs):
        env = DiceEnv()
        env.reset(seed=seed + i)
        for _ in range(quotas[i]):
            out.append(env.length)
            env.reset()
    return out


def test_quotas_split_episodes_across_envs():
    env = make_vector_env("RLearnTestEval/Dice-v0", 3)
    try:
        assert Evaluator(env, ConstantPolicy(), 7).quotas == [3, 2, 2]
        assert Evaluator(env, ConstantPolicy(), 2).quotas == [1, 1, 0]
        assert Evaluator(env, ConstantPolicy(), 6).quotas == [2, 2, 2]
    finally:
        env.close()


@pytest.mark.parametrize("n_episodes", [1, 2, 5, 9])
def test_exactly_n_episodes_first_ones_per_env(n_episodes):
    env = make_vector_env("RLearnTestEval/Dice-v0", 3)
    try:
        evaluator = Evaluator(env, ConstantPolicy(), n_episodes, seed=40)
        result = evaluator.evaluate()
    finally:
        env.close()
    lengths = reference_episodes(40, 3, evaluator.quotas)
    assert result["episodes"] == n_episodes == len(evaluator.episodes)
    assert [e["episode_length"] for e in evaluator.episodes] == lengths
    assert [e["env_index"] for e in evaluator.episodes] == [i for i, q in enumerate(evaluator.quotas) for _ in range(q)]
    assert result["episode_return_mean"] == pytest.approx(np.mean(lengths), rel=1e-12)
    assert result["episode_return_std"] == pytest.approx(np.std(lengths), rel=1e-12, abs=1e-12)
    assert result["episode_return_min"] == min(lengths) and result["episode_return_max"] == max(lengths)
    assert result["episode_length_mean"] == pytest.approx(np.mean(lengths), rel=1e-12)
    assert set(result) == {
        "episode_return_mean", "episode_return_std", "episode_return_min", "episode_return_max",
        "episode_length_mean", "episodes",
    }


def test_not_biased_toward_short_episodes():
    """Stopping at the first n episodes to end anywhere would favour short ones; quotas do not."""
    env = make_vector_env("RLearnTestEval/Dice-v0", 4)
    try:
        evaluator = Evaluator(env, ConstantPolicy(), 400, seed=1)
        result = evaluator.evaluate()
    finally:
        env.close()
    # lengths are uniform on 1..6 (mean 3.5) whatever the number of environments
    assert result["episode_length_mean"] == pytest.approx(np.mean(reference_episodes(1, 4, [100] * 4)), rel=1e-12)
    assert abs(result["episode_length_mean"] - 3.5) < 0.3


def test_reproducible_per_call_seeds_and_state_round_trip():
    results = []
    for _ in range(2):
        env = make_vector_env("RLearnTestEval/Dice-v0", 2)
        try:
            evaluator = Evaluator(env, ConstantPolicy(), 6, seed=9)
            results.append([evaluator.evaluate(), evaluator.evaluate(), evaluator.evaluate()])
            state = evaluator.state_dict()
        finally:
            env.close()
    assert results[0] == results[1]  # same seed, same results call for call
    # call k resets with derive_seed(9, k): the calls differ from each other
    for k, result in enumerate(results[0]):
        lengths = reference_episodes(derive_seed(9, k), 2, [3, 3])
        assert result["episode_length_mean"] == pytest.approx(np.mean(lengths), rel=1e-12)
    assert len({r["episode_length_mean"] for r in results[0]}) > 1
    assert state == {"evaluations": 3}

    env = make_vector_env("RLearnTestEval/Dice-v0", 2)
    try:
        resumed = Evaluator(env, ConstantPolicy(), 6, seed=9)
        resumed.load_state_dict({"evaluations": 1})
        assert resumed.evaluate() == results[0][1]  # continues the sequence of evaluation seeds
        with pytest.raises(ValueError, match="expected keys"):
            resumed.load_state_dict({"evaluations": 1, "x": 2})
        with pytest.raises(ValueError, match="must be an int >= 0"):
            resumed.load_state_dict({"evaluations": -1})
        assert resumed.evaluations == 2
    finally:
        env.close()


def test_real_envs_pendulum_truncated_and_cartpole():
    env = make_vector_env("Pendulum-v1", 2, env_kwargs={"max_episode_steps": 5})
    try:
        zero = lambda obs: np.zeros((obs.shape[0], 1), np.float32)  # noqa: E731
        policy = type("ZeroTorque", (), {"_forward_eval": staticmethod(zero)})()
        result = Evaluator(env, policy, 3, seed=0).evaluate()
    finally:
        env.close()
    assert result["episodes"] == 3 and result["episode_length_mean"] == 5.0
    assert result["episode_return_max"] < 0 and result["episode_return_min"] <= result["episode_return_mean"]

    env = make_vector_env("CartPole-v1", 2)
    try:
        result = Evaluator(env, ConstantPolicy(0), 4, seed=0).evaluate()
    finally:
        env.close()
    # always pushing left topples the pole within a few steps; return == length on CartPole
    assert result["episodes"] == 4 and result["episode_return_mean"] == result["episode_length_mean"] < 20


def test_async_env_gives_the_same_result():
    results = []
    for asynchronous in (False, True):
        env = make_vector_env("RLearnTestEval/Dice-v0", 2, asynchronous=asynchronous)
        try:
            results.append(Evaluator(env, ConstantPolicy(), 5, seed=3).evaluate())
        finally:
            env.close()
    assert results[0] == results[1]


def test_errors_name_the_policy_and_argument():
    class WrongShape:
        def _forward_eval(self, obs):
            return np.zeros(obs.shape[0] + 1)

    class NaNAction:
        def _forward_eval(self, obs):
            return np.full((obs.shape[0], 1), np.nan)

    env = make_vector_env("RLearnTestEval/Dice-v0", 2)
    try:
        with pytest.raises(ValueError, match=r"WrongShape\._forward_eval returned actions of shape \(3,\)"):
            Evaluator(env, WrongShape(), 2).evaluate()
        with pytest.raises(ValueError, match=r"NaNAction\._forward_eval returned non-finite actions"):
            Evaluator(env, NaNAction(), 2).evaluate()
        for bad in (0, -2, 1.5, True):
            with pytest.raises(ValueError, match="n_episodes must be a positive int"):
                Evaluator(env, ConstantPolicy(), bad)
        with pytest.raises(TypeError, match="policy object has no _forward_eval"):
            Evaluator(env, object(), 1)
        with pytest.raises(ValueError, match="max_steps"):
            Evaluator(env, ConstantPolicy(), 1, max_steps=0)
    finally:
        env.close()
    endless = make_vector_env("RLearnTestEval/Endless-v0", 2)
    try:
        with pytest.raises(RuntimeError, match=r"0 of 2 episodes finished within max_steps=50"):
            Evaluator(endless, ConstantPolicy(), 2, max_steps=50).evaluate()
    finally:
        endless.close()
