"""make_vector_env: SAME_STEP autoreset, seeding, custom envs, unknown ids, asynchronous workers.

This module does not import torch: asynchronous workers import it to unpickle the test environment.
"""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rlearn.env import DEFAULT_ASYNC_CONTEXT, derive_seed, make_env_fn, make_vector_env, observation_dtype, register_env
from rlearn.env import vector_env as vector_env_module
from rlearn.env.vector_env import check_same_step_autoreset


class SeededCounterEnv(gym.Env):
    """obs = [t, u]: t steps since reset, u drawn from the env's generator at reset; terminates at t = 3."""

    def __init__(self, terminate_at: int = 3):
        self.observation_space = spaces.Box(np.array([0.0, 0.0], np.float32), np.array([100.0, 1.0], np.float32))
        self.action_space = spaces.Discrete(2)
        self.terminate_at = terminate_at

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.u = 0, float(self.np_random.random())
        return np.array([self.t, self.u], np.float32), {"u": self.u}

    def step(self, action):
        self.t += 1
        return np.array([self.t, self.u], np.float32), float(self.t), self.t >= self.terminate_at, False, {}


register_env("RLearnTestVec/Counter-v0", SeededCounterEnv, override=True)


def first_reset_u(seed: int) -> float:
    """u after one reset with ``seed`` (as float32, like the observation)."""
    return float(SeededCounterEnv().reset(seed=seed)[0][1])


def second_reset_u(seed: int) -> float:
    """u after a reset with ``seed`` then an unseeded reset (what a sub-env seeded by make_vector_env gives)."""
    env = SeededCounterEnv()
    env.reset(seed=seed)
    return float(env.reset()[0][1])


@pytest.mark.parametrize("asynchronous", [False, True])
def test_same_step_autoreset_and_final_obs_info(asynchronous):
    env = make_vector_env("RLearnTestVec/Counter-v0", 2, seed=5, asynchronous=asynchronous)
    try:
        assert isinstance(env, AsyncVectorEnv if asynchronous else SyncVectorEnv)
        assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        check_same_step_autoreset(env, "test")
        obs, _ = env.reset()
        u0 = obs[:, 1].copy()
        assert u0.tolist() == [second_reset_u(5), second_reset_u(6)]  # sub-env i seeded with seed + i
        for t in (1, 2):
            obs, reward, terminated, truncated, info = env.step(np.zeros(2, np.int64))
            assert obs[:, 0].tolist() == [t, t] and reward.tolist() == [t, t]
            assert "final_obs" not in info and "_final_obs" not in info
        obs, reward, terminated, truncated, info = env.step(np.zeros(2, np.int64))
        # the ended episode's last observation is in info, the returned obs is already the reset one
        assert terminated.tolist() == [True, True] and truncated.tolist() == [False, False]
        assert info["_final_obs"].tolist() == [True, True]
        assert [o.tolist() for o in info["final_obs"]] == [[3.0, u0[0]], [3.0, u0[1]]]
        assert obs[:, 0].tolist() == [0.0, 0.0] and not np.array_equal(obs[:, 1], u0)
    finally:
        env.close()
    assert env.closed
    if asynchronous:
        assert all(not p.is_alive() for p in env.processes)


def test_sub_envs_seeded_distinctly_with_seed_plus_i():
    env = make_vector_env("RLearnTestVec/Counter-v0", 3, seed=11)
    try:
        obs, _ = env.reset()  # unseeded reset continues each sub-env's seeded generator
    finally:
        env.close()
    # make_vector_env resets sub-env i once with seed 11 + i; the reset above is its second one
    assert obs[:, 1].tolist() == [second_reset_u(11 + i) for i in range(3)]
    assert len(set(obs[:, 1].tolist())) == 3


def test_seeded_reset_matches_single_envs_and_action_spaces_are_seeded():
    env_a = make_vector_env("Pendulum-v1", 2, seed=3)
    env_b = make_vector_env("Pendulum-v1", 2, seed=3)
    try:
        obs_a, _ = env_a.reset(seed=21)
        obs_b, _ = env_b.reset(seed=21)
        np.testing.assert_array_equal(obs_a, obs_b)
        for i in range(2):
            single = gym.make("Pendulum-v1")
            np.testing.assert_array_equal(obs_a[i], single.reset(seed=21 + i)[0])
        np.testing.assert_array_equal(env_a.action_space.sample(), env_b.action_space.sample())
        subs_a = [e.action_space.sample() for e in env_a.envs]
        subs_b = [e.action_space.sample() for e in env_b.envs]
        np.testing.assert_array_equal(subs_a, subs_b)
        assert not np.array_equal(subs_a[0], subs_a[1])  # seed + i, not the same seed twice
    finally:
        env_a.close()
        env_b.close()


def test_unseeded_envs_differ_between_builds(monkeypatch):
    """seed=None seeds nothing: every sub-environment (and space) draws its generator from fresh entropy
    (gymnasium's ``seeding.np_random(None)``), so two builds -- and two sub-environments of one build -- differ.
    The entropy is replaced here by a counter (1000, 1001, ...), so nothing is left to chance: the builds ask
    for fresh entropy and for nothing else, and each sub-env observes what its own fresh generator gives."""
    real_np_random = seeding.np_random
    fresh = itertools.count(1000)
    requested = []

    def deterministic_np_random(seed=None):
        requested.append(seed)
        return real_np_random(next(fresh) if seed is None else seed)

    monkeypatch.setattr(seeding, "np_random", deterministic_np_random)
    a = make_vector_env("RLearnTestVec/Counter-v0", 2)
    b = make_vector_env("RLearnTestVec/Counter-v0", 2)
    try:
        u = a.reset()[0][:, 1].tolist() + b.reset()[0][:, 1].tolist()
        env_seeds = [env.np_random_seed for env in (*a.envs, *b.envs)]
    finally:
        a.close()
        b.close()
    assert requested and all(seed is None for seed in requested)  # make_vector_env passed no seed anywhere
    assert len(set(env_seeds)) == 4 and all(1000 <= seed < 1000 + len(requested) for seed in env_seeds)
    assert u == [first_reset_u(seed) for seed in env_seeds]
    assert len(set(u)) == 4
    # the spy does see seeds when there are some: seed=5 seeds sub-envs 5 and 6 (and their spaces), nothing fresh
    requested.clear()
    make_vector_env("RLearnTestVec/Counter-v0", 2, seed=5).close()
    assert requested and set(requested) == {5, 6}


def test_unknown_env_id_names_it_and_suggests_close_ids():
    with pytest.raises(ValueError, match=r"unknown environment id 'Pendlum-v1'.*'Pendulum-v1'"):
        make_vector_env("Pendlum-v1", 2)
    with pytest.raises(ValueError, match=r"unknown environment id 'NoSuchEnvAtAll-v0'"):
        make_vector_env("NoSuchEnvAtAll-v0", 1, asynchronous=True)


def test_callable_factory_with_env_kwargs():
    built = []

    def factory(terminate_at):
        built.append(terminate_at)
        return SeededCounterEnv(terminate_at=terminate_at)

    env = make_vector_env(factory, 2, seed=0, env_kwargs={"terminate_at": 1})
    try:
        env.reset()
        _, _, terminated, _, info = env.step(np.zeros(2, np.int64))
        assert terminated.tolist() == [True, True] and info["_final_obs"].all()
    finally:
        env.close()
    assert built == [1, 1]
    with pytest.raises(TypeError, match="returned int, not a gymnasium.Env"):
        make_vector_env(lambda: 3, 1)
    with pytest.raises(TypeError, match="env must be a gymnasium id"):
        make_env_fn(42)
    with pytest.raises(TypeError, match="env_kwargs must be a mapping"):
        make_env_fn("Pendulum-v1", env_kwargs=[1])


def test_make_env_fn_builds_one_seeded_env():
    fn = make_env_fn("RLearnTestVec/Counter-v0", seed=4)
    env = fn()
    assert float(env.reset()[0][1]) == second_reset_u(4)
    env.close()


def test_register_env_refuses_taken_ids_unless_override():
    with pytest.raises(ValueError, match="'RLearnTestVec/Counter-v0' is already registered"):
        register_env("RLearnTestVec/Counter-v0", SeededCounterEnv)
    register_env("RLearnTestVec/Short-v0", SeededCounterEnv, kwargs={"terminate_at": 2}, override=True)
    register_env("RLearnTestVec/Short-v0", SeededCounterEnv, kwargs={"terminate_at": 1}, max_episode_steps=9, override=True)
    assert gym.spec("RLearnTestVec/Short-v0").kwargs == {"terminate_at": 1}
    assert gym.spec("RLearnTestVec/Short-v0").max_episode_steps == 9
    with pytest.raises(TypeError, match="entry_point"):
        register_env("RLearnTestVec/Bad-v0", 3)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_num_envs(bad):
    with pytest.raises(ValueError, match="num_envs must be a positive int"):
        make_vector_env("Pendulum-v1", bad)


@pytest.mark.parametrize("bad", [-1, 1.5, "3"])
def test_bad_seed(bad):
    with pytest.raises(ValueError, match="seed must be a non-negative int or None"):
        make_vector_env("Pendulum-v1", 1, seed=bad)


def test_async_uses_a_fork_free_context():
    assert DEFAULT_ASYNC_CONTEXT in ("forkserver", "spawn")
    with pytest.raises(ValueError, match="context 'nonsense' is not available"):
        make_vector_env("Pendulum-v1", 1, asynchronous=True, context="nonsense")


def test_check_same_step_autoreset_refuses_other_envs():
    next_step = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    try:
        with pytest.raises(ValueError, match="Collector needs a vector env with autoreset_mode=AutoresetMode.SAME_STEP"):
            check_same_step_autoreset(next_step, "Collector")
    finally:
        next_step.close()
    with pytest.raises(TypeError, match="Evaluator needs a gymnasium.vector.VectorEnv"):
        check_same_step_autoreset(gym.make("CartPole-v1"), "Evaluator")


def test_observation_dtype():
    assert observation_dtype(spaces.Box(-1, 1, (3,), np.float64), "t") == np.float32
    assert observation_dtype(spaces.Box(0, 255, (4, 4), np.uint8), "t") == np.uint8
    assert observation_dtype(spaces.Discrete(5), "t") == np.int64
    assert observation_dtype(spaces.MultiBinary(3), "t") == np.int8
    with pytest.raises(TypeError, match="Collector: observation space Dict"):
        observation_dtype(spaces.Dict({"a": spaces.Discrete(2)}), "Collector")


def test_derive_seed():
    assert derive_seed(None, 3) is None
    assert derive_seed(7, 0) == 7
    later = [derive_seed(7, k) for k in range(1, 50)]
    assert len(set(later)) == 49 and 7 not in later
    assert later == [derive_seed(7, k) for k in range(1, 50)]
    assert derive_seed(8, 1) != derive_seed(7, 1)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_copy_false_returns_the_vector_envs_own_batch(asynchronous):
    """copy=True (default): every step returns a new observation array; copy=False: the env's own batch,
    overwritten by the next step (what the Collector copies), with the same values."""
    shared = make_vector_env("RLearnTestVec/Counter-v0", 2, seed=3, asynchronous=asynchronous, copy=False)
    copied = make_vector_env("RLearnTestVec/Counter-v0", 2, seed=3, asynchronous=asynchronous)
    try:
        first, _ = shared.reset(seed=3)
        ref_first, _ = copied.reset(seed=3)
        np.testing.assert_array_equal(first, ref_first)
        actions = np.zeros(2, np.int64)
        second = shared.step(actions)[0]
        ref_second = copied.step(actions)[0]
        assert second is first  # the same buffer, now holding the step's observations
        np.testing.assert_array_equal(second, ref_second)
        assert copied.step(actions)[0] is not ref_second
    finally:
        shared.close()
        copied.close()


def test_missing_optional_dependency_says_what_to_install(tmp_path, monkeypatch):
    """An environment whose module needs an uninstalled package fails before any env is built, with a
    ValueError naming the id and carrying gymnasium's install hint; MuJoCo's names rlearn's extra."""
    (tmp_path / "needs_box_thing.py").write_text(
        "from gymnasium import error\nraise error.DependencyNotInstalled('Box thing is not installed, run `pip install box`')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(gym.registry, "NeedsBox-v0", gym.envs.registration.EnvSpec("NeedsBox-v0", "needs_box_thing:Env"))
    with pytest.raises(ValueError) as info:
        make_vector_env("NeedsBox-v0", 2)
    assert str(info.value) == ("environment 'NeedsBox-v0' needs a package that is not installed: Box thing is not "
                               "installed, run `pip install box`")
    monkeypatch.setitem(vector_env_module.INSTALL_HINTS, "needs_box_thing", "the box extra: pip install box")
    with pytest.raises(ValueError, match=r"^environment 'NeedsBox-v0' needs the box extra: pip install box$"):
        make_env_fn("NeedsBox-v0")
