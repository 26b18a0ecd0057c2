"""rlearn.rl.squashed_gaussian against torch.distributions (Normal + TanhTransform) and float64 formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch.distributions import Normal, TransformedDistribution
from torch.distributions.transforms import TanhTransform

from rlearn.rl.squashed_gaussian import squashed_gaussian_sample, tanh_log_abs_det_jacobian


def _naive(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor):
    """The textbook route: u = rsample of Normal(mean, std) with the same noise, Normal.log_prob(u),
    minus log(1 - tanh(u)^2) = log(sech(u)^2) = -2 log(cosh(u)), summed over the action dimension.
    (``1 - tanh(u)^2`` itself cancels catastrophically for large |u|: at |u| = 11 it is 1e-9 with a float64
    relative error of 1e-7, which the 1e-9 tolerance below would blame on the implementation.)"""
    std = log_std.exp()
    u = mean + std * noise  # what Normal(mean, std).rsample() computes for this eps
    log_prob = Normal(mean, std).log_prob(u) + 2.0 * torch.log(torch.cosh(u))
    return torch.tanh(u), log_prob.sum(-1)


@settings(max_examples=50, deadline=None)
@given(
    batch=st.integers(1, 6), dim=st.integers(1, 4), seed=st.integers(0, 2**31 - 1),
    scale=st.floats(0.1, 2.0), log_std_shift=st.floats(-3.0, 1.0),
)
@example(batch=5, dim=4, seed=1, scale=1.0, log_std_shift=1.0)  # |u| = 11: the old reference's cancellation
def test_sample_and_log_prob_match_the_naive_route(batch, dim, seed, scale, log_std_shift):
    gen = torch.Generator().manual_seed(seed)
    mean = (torch.randn(batch, dim, generator=gen, dtype=torch.float64) * scale).requires_grad_()
    log_std = (torch.randn(batch, dim, generator=gen, dtype=torch.float64) * 0.3 + log_std_shift).requires_grad_()
    noise = torch.randn(batch, dim, generator=gen, dtype=torch.float64)
    action, log_prob = squashed_gaussian_sample(mean, log_std, noise)
    ref_action, ref_log_prob = _naive(mean, log_std, noise)
    torch.testing.assert_close(action, ref_action, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(log_prob, ref_log_prob, rtol=1e-9, atol=1e-9)
    # gradients (reparameterisation) of a loss that uses both outputs
    weights = torch.randn(batch, generator=gen, dtype=torch.float64)
    grads = torch.autograd.grad((log_prob * weights).sum() + action.sum(), (mean, log_std))
    ref_grads = torch.autograd.grad((ref_log_prob * weights).sum() + ref_action.sum(), (mean, log_std))
    for ours, ref in zip(grads, ref_grads):
        torch.testing.assert_close(ours, ref, rtol=1e-8, atol=1e-9)


def test_log_prob_matches_torch_distributions_tanh_transform():
    """The density of a = tanh(u) under TransformedDistribution(Normal, TanhTransform), evaluated at a."""
    gen = torch.Generator().manual_seed(3)
    mean = torch.randn(64, 2, generator=gen, dtype=torch.float64)
    log_std = torch.randn(64, 2, generator=gen, dtype=torch.float64) * 0.5 - 0.5
    noise = torch.randn(64, 2, generator=gen, dtype=torch.float64)
    action, log_prob = squashed_gaussian_sample(mean, log_std, noise)
    dist = TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform()])
    torch.testing.assert_close(log_prob, dist.log_prob(action).sum(-1), rtol=1e-6, atol=1e-6)


def test_one_dimension_by_hand():
    """mean 0.5, std e^-1, eps 1: u = 0.5 + e^-1; log N = -1/2 - (-1) - log sqrt(2 pi); minus log(1 - tanh(u)^2)."""
    action, log_prob = squashed_gaussian_sample(torch.tensor([[0.5]], dtype=torch.float64),
                                                torch.tensor([[-1.0]], dtype=torch.float64),
                                                torch.tensor([[1.0]], dtype=torch.float64))
    u = 0.5 + math.exp(-1.0)
    expected = -0.5 + 1.0 - 0.5 * math.log(2 * math.pi) - math.log(1.0 - math.tanh(u) ** 2)
    assert action.item() == pytest.approx(math.tanh(u), rel=1e-14)
    assert log_prob.item() == pytest.approx(expected, rel=1e-12)


def test_jacobian_stays_finite_where_tanh_saturates():
    u = torch.tensor([-40.0, -10.0, 0.0, 10.0, 40.0])
    value = tanh_log_abs_det_jacobian(u)
    assert torch.isfinite(value).all()
    # log(1 - tanh(u)^2) = log(4) - 2|u| - 2 log(1 + e^{-2|u|}) exactly
    expected = np.log(4.0) - 2 * np.abs(u.double().numpy()) - 2 * np.log1p(np.exp(-2 * np.abs(u.double().numpy())))
    np.testing.assert_allclose(value.double().numpy(), expected, rtol=1e-6, atol=1e-5)
    assert torch.isinf(torch.log(1 - torch.tanh(u[-1:]) ** 2)).all()  # the naive formula does not


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="same shape"):
        squashed_gaussian_sample(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 1))


def test_noise_is_a_constant_of_the_sample():
    """Gradients reach mean and log_std only; a noise tensor that requires grad changes nothing."""
    gen = torch.Generator().manual_seed(5)
    mean = torch.randn(4, 2, generator=gen, requires_grad=True)
    log_std = (torch.randn(4, 2, generator=gen) * 0.3).requires_grad_()
    noise = torch.randn(4, 2, generator=gen)
    action, log_prob = squashed_gaussian_sample(mean, log_std, noise)
    grads = torch.autograd.grad(log_prob.sum() + action.sum(), (mean, log_std))
    noise_req = noise.clone().requires_grad_()
    action2, log_prob2 = squashed_gaussian_sample(mean, log_std, noise_req)
    (log_prob2.sum() + action2.sum()).backward()
    assert noise_req.grad is None
    torch.testing.assert_close(action2, action, rtol=0, atol=0)
    torch.testing.assert_close(log_prob2, log_prob, rtol=0, atol=0)
    torch.testing.assert_close(mean.grad, grads[0], rtol=0, atol=0)
    torch.testing.assert_close(log_std.grad, grads[1], rtol=0, atol=0)
