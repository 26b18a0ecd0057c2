"""Environments that fail in ways the log used to hide: a custom environment registered from a
``custom_imports`` file in ``env.asynchronous=True`` workers (``No module named 'rlearn_user_config'``,
then only ``ConnectionResetError`` in the log), a worker that cannot start at all, and an environment
whose observations do not have its observation space's shape (a numpy traceback naming neither)."""

from __future__ import annotations

import sys
import types

import gymnasium as gym
import numpy as np
import pytest
import run_fault_helpers as helpers  # tests/faults/ is on sys.path (pytest's rootdir insertion)

from rlearn.config import import_file
from rlearn.env import make_vector_env
from rlearn.env.checks import EnvironmentFault

ENV_FILE = '''
import numpy as np
import gymnasium as gym
from gymnasium import spaces
from rlearn.env import register_env


class Corridor(gym.Env):
    """4-dimensional observations; from step ``grow_at`` on they have a fifth value."""

    def __init__(self, grow_at=10**9):
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.grow_at = grow_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.t += 1
        width = 5 if self.t >= self.grow_at else 4
        return np.full(width, self.t / 100, np.float32), 1.0, False, self.t >= 10, {}


register_env("Corridor-v0", Corridor, override=True)
'''


@pytest.fixture
def corridor(tmp_path):
    """``Corridor-v0``, registered by executing a file the way ``custom_imports`` does."""
    path = tmp_path / "corridor_env.py"
    path.write_text(ENV_FILE)
    import_file(path)
    yield "Corridor-v0"
    gym.registry.pop("Corridor-v0", None)


def test_an_env_registered_in_a_custom_imports_file_runs_in_asynchronous_workers(corridor):
    env = make_vector_env(corridor, 2, seed=0, asynchronous=True)
    try:
        obs, _ = env.reset()
        for _ in range(3):
            obs, reward, *_ = env.step(np.array([0, 1]))
    finally:
        env.close()
    assert obs.shape == (2, 4) and np.allclose(obs, 0.03) and reward.tolist() == [1.0, 1.0]


def test_a_run_with_a_custom_env_and_asynchronous_workers_trains(tmp_path):
    env_file = tmp_path / "corridor_env.py"
    env_file.write_text(ENV_FILE)
    config = helpers.probe_config(tmp_path, custom_imports=[str(helpers.PROBE), str(env_file)],
                                  env=dict(id="Corridor-v0", num_envs=2, asynchronous=True), max_env_steps=32)
    out = helpers.rlearn("train", str(config), "--work-dir", str(tmp_path / "run"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rlearn_user_config" not in out.stderr


def test_a_worker_that_cannot_start_says_why_and_what_to_do():
    ghost = types.ModuleType("ghost_envs")  # in this process only, like a class defined in a script's __main__
    exec("import gymnasium as gym\ndef make(**kwargs):\n    return gym.make('CartPole-v1')\n", ghost.__dict__)
    sys.modules["ghost_envs"] = ghost
    try:
        with pytest.raises(ValueError, match=r"^asynchronous=True: an environment worker process died while starting "
                                             r"\((ConnectionResetError|EOFError|BrokenPipeError).*\); its own error is "
                                             r"printed above\. .* Set env\.asynchronous=False to see the error in this "
                                             r"process$"):
            make_vector_env(ghost.make, 1, asynchronous=True)
    finally:
        del sys.modules["ghost_envs"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_observation_of_the_wrong_shape_names_the_env_and_the_shapes(corridor, asynchronous):
    env = make_vector_env(corridor, 2, seed=0, asynchronous=asynchronous, env_kwargs=dict(grow_at=3))
    try:
        env.reset()
        env.step(np.array([0, 1]))
        with pytest.raises(EnvironmentFault) as error:
            env.step(np.array([0, 1]))
            env.step(np.array([0, 1]))
    finally:
        env.close()
    assert str(error.value) == (
        "environment 'Corridor-v0' returned an observation of shape (5,) from step(), but its observation_space is "
        "Box(-1.0, 1.0, (4,), float32) (shape (4,)); the environment produced it (not the policy): make the "
        "observations and the observation_space agree")
