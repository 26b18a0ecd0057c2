"""examples/custom_policy.py: the REINFORCE example's returns, its monitor contract, its state, its learning."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn.config import import_file, load_config
from rlearn.registry import get_policy_class
from rlearn.run import train

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "custom_policy.py"
demo = import_file(EXAMPLE)


def make_policy(**cfg):
    env = gym.make("CartPole-v1")
    policy = demo.ReinforcePolicy({"hidden": 8, **cfg}, env.observation_space, env.action_space, seed=0)
    env.close()
    return policy


def fake_rollout(T: int = 4, N: int = 2, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    terminated = torch.zeros(T, N)
    terminated[1, 0] = 1.0
    return {
        "obs": torch.randn(T, N, 4, generator=g), "next_obs": torch.randn(T, N, 4, generator=g),
        "action": torch.randint(0, 2, (T, N), generator=g), "reward": torch.ones(T, N),
        "terminated": terminated, "truncated": torch.zeros(T, N),
    }


# ------------------------------------------------------------------------------------------ returns
def test_returns_by_hand():
    gamma = 0.5
    r = torch.ones(3, 1)
    v = torch.tensor([[10.0], [20.0], [4.0]])  # V(next_obs[t])
    zero = torch.zeros(3, 1)
    # no episode end: bootstrap from V(next_obs[-1]) = 4 -> 3, 2.5, 2.25
    assert demo.discounted_returns(r, zero, zero, v, gamma).flatten().tolist() == [2.25, 2.5, 3.0]
    # terminated at t=1: nothing after it counts; t=2 (a new episode) bootstraps from 4
    term = torch.tensor([[0.0], [1.0], [0.0]])
    assert demo.discounted_returns(r, term, zero, v, gamma).flatten().tolist() == [1.5, 1.0, 3.0]
    # truncated at t=1: bootstrap from V(final obs) = 20
    assert demo.discounted_returns(r, zero, term, v, gamma).flatten().tolist() == [6.5, 11.0, 3.0]


def naive_returns(reward, terminated, truncated, next_value, gamma):
    T, N = reward.shape
    out = np.zeros((T, N))
    for n in range(N):
        for t in range(T):
            total, discount, k = 0.0, 1.0, t
            while True:
                total += discount * reward[k, n]
                discount *= gamma
                if terminated[k, n]:
                    break
                if truncated[k, n] or k == T - 1:
                    total += discount * next_value[k, n]
                    break
                k += 1
            out[t, n] = total
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 3), st.floats(0.0, 1.0), st.integers(0, 2**31 - 1))
def test_returns_match_naive_reference(T, N, gamma, seed):
    rng = np.random.default_rng(seed)
    reward = rng.normal(size=(T, N))
    ends = rng.integers(0, 3, size=(T, N))  # 0: continues, 1: terminated, 2: truncated
    terminated, truncated = (ends == 1).astype(float), (ends == 2).astype(float)
    next_value = rng.normal(size=(T, N))
    got = demo.discounted_returns(*(torch.tensor(a, dtype=torch.float64) for a in (reward, terminated, truncated, next_value)), gamma)
    np.testing.assert_allclose(got.numpy(), naive_returns(reward, terminated, truncated, next_value, gamma), rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------------- monitor contract
def test_declares_every_key_and_reports_the_baseline_loss_periodically():
    policy = make_policy(baseline_every=3)
    assert policy.monitor_vars() == ["policy_loss", "entropy", "baseline_loss"]
    reported = [sorted(policy._forward_learn(fake_rollout(seed=i))) for i in range(6)]
    every = ["entropy", "policy_loss"]
    assert reported == [every, every, ["baseline_loss", *every]] * 2
    assert policy.iterations == 6


def reference_policy_step(actor, optimizer, baseline, data, cfg):
    """One REINFORCE iteration written out from the formulas (not the example's code path): returns bootstrapped
    from V(next_obs), advantage G - V(s), the log-softmax policy-gradient loss with its entropy bonus, one Adam
    step of ``actor``. Returns (policy_loss, entropy, returns)."""
    obs = data["obs"].float()
    with torch.no_grad():
        next_value = baseline(data["next_obs"].float()).squeeze(-1)
        returns = torch.tensor(naive_returns(data["reward"].double().numpy(), data["terminated"].numpy(),
                                             data["truncated"].numpy(), next_value.double().numpy(), cfg["gamma"]),
                               dtype=torch.float32)
        advantage = returns - baseline(obs).squeeze(-1)
    log_probs = torch.log_softmax(actor(obs), -1)
    entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
    taken = log_probs.gather(-1, data["action"].long().unsqueeze(-1)).squeeze(-1)
    loss = -(taken * advantage).mean() - cfg["entropy_coef"] * entropy
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item(), entropy.item(), returns


def test_reported_numbers_are_recomputed_from_the_data():
    """Every reported value is the one the batch and the networks give: policy_loss and entropy of each
    iteration, the actor's Adam step, and the baseline fit's last-epoch MSE on the returns gathered since the
    previous fit. A policy that ignores its data, or reports fixed numbers, fails here."""
    policy = make_policy(baseline_every=3, baseline_epochs=4, entropy_coef=0.05)
    cfg = policy.cfg
    baseline = copy.deepcopy(policy.baseline)  # only the fit moves it: the same for the 3 iterations before it
    actor = copy.deepcopy(policy.actor)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=cfg["lr"])
    gathered_obs, gathered_returns = [], []
    reported = []
    for i in range(3):
        data = fake_rollout(T=5, N=3, seed=10 + i)
        data["reward"] = torch.randn(5, 3, generator=torch.Generator().manual_seed(20 + i))
        data["truncated"][3, 2] = 1.0
        policy_loss, entropy, returns = reference_policy_step(actor, actor_optimizer, baseline, data, cfg)
        info = policy._forward_learn(data)
        reported.append(info)
        assert float(info["policy_loss"]) == pytest.approx(policy_loss, rel=1e-5, abs=1e-6)
        assert float(info["entropy"]) == pytest.approx(entropy, rel=1e-5)
        assert 0.0 < float(info["entropy"]) <= math.log(2)
        for got, want in zip(policy.actor.parameters(), actor.parameters()):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        gathered_obs.append(data["obs"].flatten(0, 1))
        gathered_returns.append(returns.flatten())
    # the different batches gave different numbers (a constant policy reports the same ones every time)
    assert len({float(r["policy_loss"]) for r in reported}) == 3 and len({float(r["entropy"]) for r in reported}) == 3

    # the fit at iteration 3: baseline_epochs Adam steps of MSE(V(s), G) over the 3 gathered rollouts
    obs, returns = torch.cat(gathered_obs), torch.cat(gathered_returns)
    optimizer = torch.optim.Adam(baseline.parameters(), lr=cfg["baseline_lr"])
    for _ in range(cfg["baseline_epochs"]):
        loss = ((baseline(obs).squeeze(-1) - returns) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert reported[2]["baseline_loss"] == pytest.approx(loss.item(), rel=1e-5)
    for got, want in zip(policy.baseline.parameters(), baseline.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert policy._fit_obs == [] and policy._fit_returns == []


def test_state_round_trip_keeps_the_pending_baseline_data():
    policy = make_policy(baseline_every=3)
    policy._forward_learn(fake_rollout(seed=1))
    state = policy.state_dict()
    clone = make_policy(baseline_every=3)
    clone.load_state_dict(state)
    assert clone.iterations == 1 and len(clone._fit_obs) == 1
    torch.manual_seed(5)
    a = policy._forward_learn(fake_rollout(seed=2))
    torch.manual_seed(5)
    b = clone._forward_learn(fake_rollout(seed=2))
    assert {k: float(v) for k, v in a.items()} == {k: float(v) for k, v in b.items()}


def test_collect_and_eval_actions():
    policy = make_policy()
    obs = np.zeros((3, 4), dtype=np.float32)
    out = policy._forward_collect(obs, envstep=0)
    assert set(out) == {"action"} and out["action"].shape == (3,) and set(out["action"].tolist()) <= {0, 1}
    actions = policy._forward_eval(obs)
    assert actions.shape == (3,) and actions.tolist() == [actions[0]] * 3


def test_refuses_continuous_actions():
    env = gym.make("Pendulum-v1")
    with pytest.raises(TypeError, match="ReinforcePolicy needs a Discrete action space"):
        demo.ReinforcePolicy({}, env.observation_space, env.action_space)
    env.close()


# ------------------------------------------------------------------------------------- in a run
def test_both_declared_keys_reach_tensorboard(tmp_path, monkeypatch):
    cfg = load_config(str(EXAMPLE), [
        "env.num_envs=2", "policy.rollout_steps=8", "policy.hidden=8", "policy.baseline_every=4",
        "train.max_env_steps=128", "learner.log_freq=2", "eval.freq=none", "eval.episodes=1",
    ])
    # record what the policy reports, to check the points against the exact window means
    policy_class = get_policy_class("reinforce_demo")
    forward_learn = policy_class._forward_learn
    reports = []

    def recording_forward_learn(self, data):
        info = forward_learn(self, data)
        reports.append({k: float(v) for k, v in info.items()})
        return info

    monkeypatch.setattr(policy_class, "_forward_learn", recording_forward_learn)
    train(cfg, work_dir=tmp_path)  # 8 iterations; tables at 2, 4, 6, 8
    assert len(reports) == 8
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]

    def window_means(key, window=2):
        return [np.mean([r[key] for r in reports[end - window:end] if key in r]) for end in (2, 4, 6, 8)
                if any(key in r for r in reports[end - window:end])]

    for key in ("policy_loss", "entropy"):
        assert [e.step for e in acc.Scalars(f"learner_iter/{key}_avg")] == [2, 4, 6, 8]
        assert [e.value for e in acc.Scalars(f"learner_iter/{key}_avg")] == pytest.approx(window_means(key), rel=1e-6)
    assert len({r["policy_loss"] for r in reports}) == 8  # the numbers came from 8 different rollouts
    # every 4th iteration, window 2: only the tables at 4 and 8 have a value; the others show '-'
    assert [e.step for e in acc.Scalars("learner_iter/baseline_loss_avg")] == [4, 8]
    assert [e.step for e in acc.Scalars("learner_step/baseline_loss_avg")] == [64, 128]
    baseline_losses = [reports[3]["baseline_loss"], reports[7]["baseline_loss"]]
    assert window_means("baseline_loss") == baseline_losses
    assert [e.value for e in acc.Scalars("learner_iter/baseline_loss_avg")] == pytest.approx(baseline_losses, rel=1e-6)
    assert [e.value for e in acc.Scalars("learner_step/baseline_loss_avg")] == pytest.approx(baseline_losses, rel=1e-6)
    assert "learner_iter/cur_lr_actor_avg" in tags and "learner_iter/cur_lr_baseline_avg" in tags
    assert [e.value for e in acc.Scalars("learner_iter/cur_lr_actor_avg")] == pytest.approx([3e-3] * 4)
    log = (tmp_path / "reinforce_cartpole.log").read_text()
    assert "never been reported" not in log and "is not declared" not in log


@pytest.mark.slow
def test_solves_cartpole(tmp_path):
    """The example as shipped reaches its stop_value (475, greedy evaluation) well within its budget."""
    result = train(load_config(str(EXAMPLE)), work_dir=tmp_path)
    assert result.stop_reason == "stop_value", result.last_eval
    assert result.last_eval["episode_return_mean"] >= 475
