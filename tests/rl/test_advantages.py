"""rlearn.rl.advantages: GAE against a hand-made rollout and a naive reference, explained_variance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlearn.rl import compute_gae, explained_variance


def naive_gae(reward, value, next_value, terminated, truncated, gamma, lam):
    """Reference from the definition: A[t] = sum_l (gamma*lam)^l delta[t+l] over the rest of the episode
    inside the rollout, delta[u] = r[u] + gamma * V(next_obs[u]) * (not terminated[u]) - V(obs[u])."""
    T, N = len(reward), len(reward[0])
    adv = [[0.0] * N for _ in range(T)]
    for n in range(N):
        for t in range(T):
            total, weight = 0.0, 1.0
            for u in range(t, T):
                bootstrap = 0.0 if terminated[u][n] else gamma * next_value[u][n]
                total += weight * (reward[u][n] + bootstrap - value[u][n])
                if terminated[u][n] or truncated[u][n]:
                    break
                weight *= gamma * lam
            adv[t][n] = total
    return adv


def test_gae_hand_made_rollout():
    """T=3, N=2, gamma=0.5, lambda=0.5. Env 0 terminates at t=1 then starts a new episode;
    env 1 is truncated at t=0 (bootstraps V(final obs) = 4) and its last step bootstraps V(next_obs) = 8."""
    reward = torch.tensor([[1.0, 2.0], [1.0, 0.0], [1.0, 1.0]])
    value = torch.tensor([[2.0, 1.0], [2.0, 3.0], [1.0, 2.0]])
    next_value = torch.tensor([[2.0, 4.0], [100.0, 2.0], [6.0, 8.0]])
    terminated = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    truncated = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    adv, ret = compute_gae(reward, value, next_value, terminated, truncated, gamma=0.5, gae_lambda=0.5)
    # deltas: env0: t0 1+1-2=0, t1 1+0-2=-1 (terminal: V(next)=100 ignored), t2 1+3-1=3
    #         env1: t0 2+2-1=3 (truncated: bootstraps), t1 0+1-3=-2, t2 1+4-2=3
    # env0: A2=3, A1=-1 (episode ended at t1: no A2 term), A0=0+0.25*-1=-0.25
    # env1: A2=3, A1=-2+0.25*3=-1.25, A0=3 (episode ended at t0)
    expected = torch.tensor([[-0.25, 3.0], [-1.0, -1.25], [3.0, 3.0]])
    assert torch.equal(adv, expected)
    assert torch.equal(ret, expected + value)


def test_gae_lambda_one_is_the_discounted_return_minus_value_and_zero_is_td():
    """lambda=1: Monte-Carlo return (bootstrapped at the rollout end) minus V; lambda=0: the one-step TD error."""
    reward = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    value = torch.tensor([[0.5], [0.25], [1.0]], dtype=torch.float64)
    next_value = torch.tensor([[0.25], [1.0], [4.0]], dtype=torch.float64)
    zeros = torch.zeros_like(reward)
    adv, ret = compute_gae(reward, value, next_value, zeros, zeros, gamma=0.5, gae_lambda=1.0)
    # returns: G2 = 3 + 0.5*4 = 5, G1 = 2 + 0.5*5 = 4.5, G0 = 1 + 0.5*4.5 = 3.25
    assert ret.flatten().tolist() == [3.25, 4.5, 5.0]
    assert adv.flatten().tolist() == [2.75, 4.25, 4.0]
    adv0, _ = compute_gae(reward, value, next_value, zeros, zeros, gamma=0.5, gae_lambda=0.0)
    assert adv0.flatten().tolist() == [1.0 + 0.125 - 0.5, 2.0 + 0.5 - 0.25, 3.0 + 2.0 - 1.0]


@settings(max_examples=80, deadline=None)
@given(
    T=st.integers(1, 7),
    N=st.integers(1, 3),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_gae_matches_naive_reference(T, N, gamma, lam, seed):
    rng = np.random.default_rng(seed)
    reward, value, next_value = (rng.normal(size=(T, N)) for _ in range(3))
    ends = rng.integers(0, 3, size=(T, N))  # 0: continues, 1: terminated, 2: truncated
    terminated, truncated = (ends == 1).astype(float), (ends == 2).astype(float)
    to_t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    adv, ret = compute_gae(to_t(reward), to_t(value), to_t(next_value), to_t(terminated), to_t(truncated), gamma, lam)
    expected = naive_gae(reward.tolist(), value.tolist(), next_value.tolist(), terminated, truncated, gamma, lam)
    np.testing.assert_allclose(adv.numpy(), np.array(expected), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ret.numpy(), np.array(expected) + value, rtol=1e-10, atol=1e-10)


def test_gae_is_the_one_used_by_ppg_and_ppo():
    """One implementation: both policies compute advantages in their shared base, with the shared function."""
    import policies.actor_critic
    import policies.ppg
    import policies.ppo

    assert policies.actor_critic.compute_gae is compute_gae
    assert issubclass(policies.ppg.PPGPolicy, policies.actor_critic.OnPolicyActorCritic)
    assert issubclass(policies.ppo.PPOPolicy, policies.actor_critic.OnPolicyActorCritic)
    assert "_advantage_batch" not in vars(policies.ppg.PPGPolicy) and "_advantage_batch" not in vars(policies.ppo.PPOPolicy)
    assert policies.ppg.explained_variance is explained_variance is policies.ppo.explained_variance


def test_explained_variance():
    target = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(target, target) == 1.0
    assert explained_variance(torch.full((4,), 2.5), target) == 0.0
    # residual [1, -1, 1, -1]: Var 1 against Var(target) 1.25 -> 1 - 0.8
    assert explained_variance(target + torch.tensor([-1.0, 1.0, -1.0, 1.0]), target) == pytest.approx(1.0 - 1.0 / 1.25)
    assert math.isnan(explained_variance(target, torch.ones(4)))
