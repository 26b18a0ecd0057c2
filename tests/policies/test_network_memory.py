"""Networks too large for the memory are refused before anything is allocated: a one-line config error naming
``policy.hidden_sizes`` and the estimate (a PolicyConfigError from the policy, rc 2 from ``rlearn train``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from gymnasium import spaces

import policies.base as base_module
from policies import DQNPolicy, PolicyConfigError, PPGPolicy, PPOPolicy, SACPolicy, TD3Policy
from rlearn.nn import MLP

BOX = spaces.Box(-1.0, 1.0, (3,), np.float32)
SPACES = {
    TD3Policy: (BOX, spaces.Box(-1.0, 1.0, (2,), np.float32)),
    SACPolicy: (BOX, spaces.Box(-1.0, 1.0, (2,), np.float32)),
    DQNPolicy: (BOX, spaces.Discrete(4)),
    PPOPolicy: (BOX, spaces.Discrete(4)),
    PPGPolicy: (BOX, spaces.Discrete(4)),
}


@pytest.mark.parametrize("cls", list(SPACES))
def test_absurd_hidden_sizes_are_refused_naming_the_key_and_the_estimate(cls, monkeypatch):
    """[60000, 60000] hidden layers need over 50 GiB for any bundled policy; refused before allocating (the
    allocator is never asked: nn.Linear would raise or be killed)."""
    monkeypatch.setattr(base_module, "_available_memory", lambda device: 8 * 2**30)
    monkeypatch.setattr(torch.nn.Linear, "__init__", lambda *a, **k: pytest.fail("a network was allocated"))
    with pytest.raises(PolicyConfigError) as caught:
        cls({"hidden_sizes": [60000, 60000]}, *SPACES[cls], seed=0)
    message = str(caught.value)
    assert message.startswith(f"{cls.__name__}: config key 'policy.hidden_sizes' is [60000, 60000]: the networks "
                              "would take about ")
    assert "GiB (parameters, gradients and Adam state), more than 50% of the 8.0 GiB available on cpu; lower " \
           "policy.hidden_sizes" in message and "\n" not in message


def test_the_estimate_is_parameters_gradients_adam_state_and_targets(monkeypatch):
    """DQN: 16 bytes per trained parameter (value, gradient, two Adam moments) and 4 per target parameter,
    refused just above half the available memory, accepted at it."""
    sizes = [3, 64, 64, 4]
    needed = 4 * (4 * MLP.parameter_count(sizes) + MLP.parameter_count(sizes))
    monkeypatch.setattr(base_module, "_available_memory", lambda device: 2 * needed)
    DQNPolicy({"hidden_sizes": [64, 64]}, *SPACES[DQNPolicy], seed=0)  # exactly half: accepted
    monkeypatch.setattr(base_module, "_available_memory", lambda device: 2 * needed - 2)
    with pytest.raises(PolicyConfigError, match="policy.hidden_sizes"):
        DQNPolicy({"hidden_sizes": [64, 64]}, *SPACES[DQNPolicy], seed=0)
    monkeypatch.setattr(base_module, "_available_memory", lambda device: None)  # unknown: no check
    DQNPolicy({"hidden_sizes": [64, 64]}, *SPACES[DQNPolicy], seed=0)


def test_rlearn_train_refuses_in_one_line_with_rc_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "rlearn", "train", "td3_pendulum", "--set", "policy.hidden_sizes=[60000,60000]",
         "--work-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("rlearn train: error:")]
    assert len(errors) == 1 and "'policy.hidden_sizes' is [60000, 60000]" in errors[0], done.stderr[-2000:]
    assert "GiB" in errors[0] and "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert not (tmp_path / "run" / "ckpt").exists()
