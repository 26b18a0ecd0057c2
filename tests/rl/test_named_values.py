"""Numbers by name: ``StepMeans`` (each name's mean over a train iteration's steps) and ``host_columns`` (per-row
tensors copied to the host together, returned by name)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlearn.rl import StepMeans, host_columns


@settings(max_examples=50, deadline=None)
@given(steps=st.integers(1, 40), names=st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=5, unique=True),
       seed=st.integers(0, 2**16))
def test_step_means_are_each_names_mean(steps, names, seed):
    """Each name gets the mean of its own values (whatever the order the names were given in), bit for bit the
    mean of its column in a [steps, names] table, as a 0-d tensor without gradient."""
    gen = torch.Generator().manual_seed(seed)
    values = {name: torch.randn(steps, generator=gen) * 10 for name in names}
    means = StepMeans()
    for i in range(steps):
        order = names[i % len(names):] + names[:i % len(names)]  # keyword order varies between steps
        means.add(**{name: values[name][i].clone().requires_grad_() * 1.0 for name in order})
    assert len(means) == steps
    result = means.means()
    assert list(result) == names
    table = torch.stack([values[name] for name in names], dim=1)
    for j, name in enumerate(names):
        assert result[name].dim() == 0 and not result[name].requires_grad
        torch.testing.assert_close(result[name], values[name].double().mean().float(), rtol=1e-5, atol=1e-5)
        assert torch.equal(result[name], table.mean(0)[j])


def test_step_means_of_nothing_and_of_uneven_steps():
    assert StepMeans().means() == {} and len(StepMeans()) == 0
    means = StepMeans()
    means.add(a=torch.tensor(1.0), b=torch.tensor(2.0))
    means.add(a=torch.tensor(3.0))
    with pytest.raises(ValueError, match="same names.*'a': 2, 'b': 1"):
        means.means()


def test_host_columns_returns_each_tensor_by_name():
    log_prob = torch.tensor([-0.5, -1.5, -2.5], dtype=torch.float64)
    value = torch.tensor([1.0, 2.0, 3.0])
    action = torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    out = host_columns(log_prob=log_prob, value=value, action=action)
    assert list(out) == ["log_prob", "value", "action"]
    np.testing.assert_array_equal(out["log_prob"], np.float32([-0.5, -1.5, -2.5]))
    np.testing.assert_array_equal(out["value"], value.numpy())
    np.testing.assert_array_equal(out["action"], action.numpy())
    assert out["action"].shape == (3, 2) and all(a.dtype == np.float32 for a in out.values())
    assert all(a.flags.owndata for a in out.values())  # copies: writing one leaves the others alone
