"""action_spec and sample_categorical, shared by PPO and PPG."""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from rlearn.rl import action_spec, sample_categorical


def test_action_spec_of_discrete_and_box_spaces():
    obs = spaces.Box(-1, 1, (4,), np.float32)
    dim, spec = action_spec(obs, spaces.Discrete(3), "P")
    assert (dim, spec.discrete, spec.n_outputs, spec.low, spec.high) == (4, True, 3, None, None)
    dim, spec = action_spec(obs, spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)), "P")
    assert (dim, spec.discrete, spec.n_outputs) == (4, False, 2)
    assert spec.low.tolist() == [-2.0, 0.0] and spec.high.tolist() == [2.0, 1.0] and spec.low.dtype == np.float32


def test_action_spec_names_the_policy_and_the_space():
    with pytest.raises(TypeError, match="P needs a flat Box observation space"):
        action_spec(spaces.Box(-1, 1, (2, 2)), spaces.Discrete(2), "P")
    with pytest.raises(TypeError, match="P supports Discrete or 1-D Box action spaces, got MultiDiscrete"):
        action_spec(spaces.Box(-1, 1, (2,)), spaces.MultiDiscrete([2, 2]), "P")


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 6), a=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_sample_categorical_is_the_inverse_cdf_of_the_softmax(n, a, seed):
    logits = torch.as_tensor(np.random.default_rng(seed).normal(size=(n, a)), dtype=torch.float32)
    action, log_prob = sample_categorical(logits, np.random.default_rng(seed))
    uniform = np.random.default_rng(seed).random((n, 1))[:, 0]
    probs = torch.softmax(logits, -1).double().numpy()
    for row in range(n):  # naive inverse CDF: the first class whose cumulative probability reaches u
        cumulative, expected = 0.0, a - 1
        for k in range(a):
            cumulative += probs[row, k]
            if cumulative >= uniform[row]:
                expected = k
                break
        assert action[row] == expected
    assert action.dtype == np.int64
    torch.testing.assert_close(log_prob, torch.log_softmax(logits, -1)[torch.arange(n), torch.as_tensor(action)])
