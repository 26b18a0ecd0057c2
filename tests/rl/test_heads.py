"""rlearn.rl.heads: the action-head maths, against torch.distributions as the naive reference."""

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributions import Categorical, Independent, Normal, kl_divergence

from rlearn.rl.heads import (
    categorical_kl, categorical_log_prob_entropy, gaussian_kl, gaussian_log_prob_entropy, sample_gaussian,
)

shapes = dict(b=st.integers(1, 9), n=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))


def _randn(gen, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale


@settings(max_examples=60, deadline=None)
@given(**shapes, scale=st.sampled_from([0.1, 1.0, 5.0]))
def test_categorical_log_prob_entropy_match_torch(b, n, seed, scale):
    gen = torch.Generator().manual_seed(seed)
    logits = _randn(gen, b, n, scale=scale)
    action = torch.randint(n, (b,), generator=gen)
    log_prob, entropy = categorical_log_prob_entropy(logits, action.int())  # any integer dtype
    ref = Categorical(logits=logits)
    torch.testing.assert_close(log_prob, ref.log_prob(action))
    torch.testing.assert_close(entropy, ref.entropy())


@settings(max_examples=60, deadline=None)
@given(**shapes, shared_std=st.booleans())
def test_gaussian_log_prob_entropy_match_torch(b, n, seed, shared_std):
    gen = torch.Generator().manual_seed(seed)
    mean, action = _randn(gen, b, n), _randn(gen, b, n, scale=2.0)
    log_std = _randn(gen, n) if shared_std else _randn(gen, b, n)
    log_prob, entropy = gaussian_log_prob_entropy(mean, log_std, action)
    ref = Independent(Normal(mean, log_std.exp().expand_as(mean)), 1)
    torch.testing.assert_close(log_prob, ref.log_prob(action))
    torch.testing.assert_close(entropy, ref.entropy())
    assert log_prob.shape == entropy.shape == (b,)


@settings(max_examples=60, deadline=None)
@given(**shapes, scale=st.sampled_from([0.1, 1.0, 5.0]))
def test_categorical_kl_matches_torch(b, n, seed, scale):
    gen = torch.Generator().manual_seed(seed)
    old, new = _randn(gen, b, n, scale=scale), _randn(gen, b, n, scale=scale)
    expected = kl_divergence(Categorical(logits=old), Categorical(logits=new))
    torch.testing.assert_close(categorical_kl(old, new), expected)
    assert torch.equal(categorical_kl(old, old.clone()), torch.zeros(b, dtype=old.dtype))


def test_categorical_kl_finite_where_torch_is_inf():
    """New probabilities that underflow to exactly 0 in float32: torch's KL is inf, this one finite and exact."""
    old = torch.tensor([[0.0, -200.0, -300.0], [0.0, 0.0, 0.0]])
    new = torch.tensor([[0.0, -250.0, -120.0], [0.0, -300.0, 0.0]])
    assert torch.isinf(kl_divergence(Categorical(logits=old), Categorical(logits=new))).any()
    kl = categorical_kl(old, new)
    assert torch.isfinite(kl).all()
    # row 0: all float32 mass on class 0, where both log-probs are 0; row 1: (1/3) * (300 + log(2/3)) + ...
    log3 = math.log(3.0)
    row1 = (1 / 3) * ((-log3 + 300.0 + math.log(2.0)) + 2 * (-log3 + math.log(2.0)))
    torch.testing.assert_close(kl, torch.tensor([0.0, row1]), rtol=1e-5, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(**shapes)
def test_gaussian_kl_matches_torch(b, n, seed):
    gen = torch.Generator().manual_seed(seed)
    m0, m1, s0, s1 = _randn(gen, b, n), _randn(gen, b, n), _randn(gen, b, n), _randn(gen, b, n)
    expected = kl_divergence(Independent(Normal(m0, s0.exp()), 1), Independent(Normal(m1, s1.exp()), 1))
    torch.testing.assert_close(gaussian_kl(m0, s0, m1, s1), expected)
    torch.testing.assert_close(gaussian_kl(m0, s0, m0, s0), torch.zeros(b, dtype=m0.dtype))


def test_sample_gaussian_uses_the_generator_and_the_std():
    mean = torch.tensor([[1.0, -1.0], [0.0, 2.0]])
    log_std = torch.tensor([0.0, math.log(3.0)])
    sample = sample_gaussian(mean, log_std, np.random.default_rng(7))
    noise = torch.as_tensor(np.random.default_rng(7).standard_normal((2, 2)), dtype=torch.float32)
    torch.testing.assert_close(sample, mean + torch.tensor([1.0, 3.0]) * noise)
    assert sample.dtype == torch.float32
    # the empirical distribution: mean and std per dimension
    many = sample_gaussian(torch.zeros(20000, 2), log_std, np.random.default_rng(0))
    np.testing.assert_allclose(many.mean(0).numpy(), [0.0, 0.0], atol=0.06)
    np.testing.assert_allclose(many.std(0).numpy(), [1.0, 3.0], rtol=0.03)
