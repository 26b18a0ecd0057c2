"""Breaking the policy contract gets a message about the contract that names the user's method (file:line)."""

from __future__ import annotations

import inspect
from pathlib import Path

import gymnasium as gym
import pytest

from policies.base import check_initialised
from rlearn.collect import Collector
from rlearn.config import import_file
from rlearn.env import make_vector_env
from rlearn.learner import BaseLearner

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_policy.py"
Reinforce = import_file(EXAMPLE).ReinforcePolicy
HERE = Path(__file__).resolve()


def line_of(function) -> str:
    return f"{HERE}:{inspect.getsourcelines(function)[1]}"


def build(cls, **cfg):
    env = gym.make("CartPole-v1")
    try:
        return cls({"hidden": 8, "rollout_steps": 8, **cfg}, env.observation_space, env.action_space, seed=0)
    finally:
        env.close()


class NoSuper(Reinforce):
    def __init__(self, cfg, observation_space, action_space, device="cpu", seed=None):
        self.device = device


class NoKeys(Reinforce):
    def _monitor_vars_learn(self):
        pass


class BadValue(Reinforce):
    def _forward_learn(self, data):
        return {**super()._forward_learn(data), "policy_loss": "abc"}


class BadAction(Reinforce):
    def _forward_collect(self, obs, envstep):
        out = super()._forward_collect(obs, envstep)
        return {**out, "action": out["action"] + 5}


def test_forgetting_super_init_names_the_init_and_the_fix():
    with pytest.raises(TypeError) as info:
        check_initialised(build(NoSuper))
    message = str(info.value)
    assert f"NoSuper.__init__ ({line_of(NoSuper.__init__)}) must call super().__init__(cfg, " in message
    check_initialised(build(Reinforce))  # a policy that follows the contract passes


def test_monitor_vars_that_return_nothing_name_the_method():
    with pytest.raises(TypeError) as info:
        build(NoKeys).monitor_vars()
    assert str(info.value) == (f"NoKeys._monitor_vars_learn() ({line_of(NoKeys._monitor_vars_learn)}) must return a "
                               "list of monitor keys (every key _forward_learn() may report), got None")


def test_a_bad_value_names_forward_learn_and_records_nothing(tmp_path):
    policy = build(BadValue)
    learner = BaseLearner(policy, {"log_freq": 10}, work_dir=tmp_path)
    env = make_vector_env("CartPole-v1", 2, seed=0)
    try:
        data = Collector(env, policy, seed=0).collect(8).transitions
    finally:
        env.close()
    import torch

    rollout = {key: torch.as_tensor(value) for key, value in data.items()}
    with pytest.raises(TypeError, match=rf"BadValue._forward_learn \({line_of(BadValue._forward_learn)}\) returned "
                                        r"a bad (key or )?value: .*'policy_loss'"):
        learner.train(rollout)
    assert learner.train_iter == 0 and learner.monitor.count("entropy") == 0


def test_an_action_outside_the_space_names_forward_collect():
    env = make_vector_env("CartPole-v1", 2, seed=0)
    try:
        with pytest.raises(ValueError, match=rf"BadAction._forward_collect \({line_of(BadAction._forward_collect)}\) "
                                             r"returned action np.int64\([56]\) for environment 0, outside its action space Discrete\(2\)"):
            Collector(env, build(BadAction), seed=0).collect(4)
    finally:
        env.close()
