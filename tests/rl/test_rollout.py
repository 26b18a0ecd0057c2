"""check_rollout: the shared on-policy rollout check (PPO, PPG)."""

import numpy as np
import pytest
import torch

from rlearn.rl import ROLLOUT_KEYS, check_rollout


def rollout(T=3, N=2):
    data = {key: np.zeros((T, N), np.float32) for key in ROLLOUT_KEYS}
    data["obs"] = data["next_obs"] = np.zeros((T, N, 4), np.float32)
    data["action"] = np.ones((T, N), np.float32)
    return data


def test_converts_to_float32_and_integer_discrete_actions():
    out = check_rollout(rollout(), "P", "cpu", discrete=True)
    assert out["action"].dtype == torch.int64 and out["obs"].dtype == torch.float32 and out["obs"].shape == (3, 2, 4)
    assert check_rollout(rollout(), "P", "cpu", discrete=False)["action"].dtype == torch.float32


def test_every_problem_names_the_policy_and_the_key():
    with pytest.raises(TypeError, match="P._forward_learn expects a rollout dict, got list"):
        check_rollout([], "P", "cpu", True)
    bad = rollout()
    del bad["log_prob"]
    with pytest.raises(KeyError, match=r"P: rollout is missing \['log_prob'\]"):
        check_rollout(bad, "P", "cpu", True)
    bad = rollout()
    bad["reward"] = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match=r"P: rollout 'reward' must be \[T, N\]"):
        check_rollout(bad, "P", "cpu", True)
    bad = rollout()
    bad["value"] = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"P: rollout 'value' has shape \(2, 2\), expected"):
        check_rollout(bad, "P", "cpu", True)
    bad = rollout()
    bad["reward"][1, 0] = np.nan
    with pytest.raises(ValueError, match="P: rollout 'reward' contains NaN or inf"):
        check_rollout(bad, "P", "cpu", True)
