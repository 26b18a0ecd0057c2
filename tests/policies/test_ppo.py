"""PPOPolicy: the losses on hand-made batches, monitor keys in both directions (target_kl's sparse key),
action handling, checkpoints, bad input, the bundled configs through the CLI, and a slow learning run."""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.distributions import Categorical, Normal

import policies.ppo as ppo_module
from policies import PolicyConfigError, get_policy_class, is_scalar
from policies.ppo import (
    PPOPolicy, categorical_log_prob_entropy, clipped_surrogate_loss, gaussian_log_prob_entropy, normalize, value_loss,
)
from rlearn.rl import compute_gae
from tests.policies.rollouts import CONTINUOUS, DISCRETE, make_rollout
from tests.policies.reports import host_info

ROOT = Path(__file__).resolve().parents[2]
EVERY_UPDATE = {"policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance"}
SPARSE = {"early_stop_epoch"}

SMALL = dict(hidden_sizes=[16], rollout_steps=8, minibatch_size=8, epochs=2)


def make_policy(action="discrete", seed=0, **cfg):
    obs_space, act_space = DISCRETE if action == "discrete" else CONTINUOUS
    return PPOPolicy({**SMALL, **cfg}, obs_space, act_space, seed=seed)


def count_steps(policy):
    """Wrap the optimizer's step to count the gradient steps an update takes."""
    calls = []
    original = policy.optimizer.step
    policy.optimizer.step = lambda *a, **k: calls.append(1) or original(*a, **k)
    return calls


# ------------------------------------------------------------------------------------------ losses
def test_clipped_surrogate_on_a_hand_made_batch():
    """Ratios 1.5, 0.5, 1.0, 1.1, 0.5 with advantages 1, 1, -2, -1, -1 and eps = 0.2:
    min(r A, clip(r) A) = 1.2, 0.5, -2, -1.1, -0.8 -> loss = -mean = 0.44; samples 0, 1, 4 are outside
    [0.8, 1.2]; the gradient reaches only the samples where the unclipped term is the minimum."""
    ratio = torch.tensor([1.5, 0.5, 1.0, 1.1, 0.5], dtype=torch.float64)
    advantage = torch.tensor([1.0, 1.0, -2.0, -1.0, -1.0], dtype=torch.float64)
    old = torch.tensor([-1.0, -2.0, -0.5, -3.0, -1.0], dtype=torch.float64)
    log_prob = (old + ratio.log()).requires_grad_()
    loss, approx_kl, clipfrac = clipped_surrogate_loss(log_prob, old, advantage, 0.2)
    assert loss.item() == pytest.approx(0.44, abs=1e-12)
    assert clipfrac.item() == pytest.approx(0.6, abs=1e-12)
    kl = sum((r - 1) - math.log(r) for r in (1.5, 0.5, 1.0, 1.1, 0.5)) / 5  # 0.0971038...
    assert approx_kl.item() == pytest.approx(kl, abs=1e-12) and approx_kl.item() == pytest.approx(0.0971038, abs=1e-7)
    assert not approx_kl.requires_grad and not clipfrac.requires_grad
    loss.backward()
    # d loss / d log_prob_i = -(1/5) * r_i * A_i where the unclipped term is the minimum, else 0
    np.testing.assert_allclose(log_prob.grad.numpy(), [0.0, -0.1, 0.4, 0.22, 0.0], atol=1e-12)


def test_value_loss_plain_and_clipped_on_a_hand_made_batch():
    """V = 1, 2, 3, 2; V_collect = 1.5; targets 0, 3, 5, -1; c = 0.2.
    Unclipped squares 1, 1, 4, 9 (mean 3.75). Clipped V: 1.3, 1.7, 1.7, 1.7 -> squares 1.69, 1.69, 10.89, 7.29;
    the max per sample 1.69, 1.69, 10.89, 9 -> mean 5.8175. Only sample 3 (unclipped square larger) gets a gradient."""
    value = torch.tensor([1.0, 2.0, 3.0, 2.0], dtype=torch.float64, requires_grad=True)
    old = torch.full((4,), 1.5, dtype=torch.float64)
    target = torch.tensor([0.0, 3.0, 5.0, -1.0], dtype=torch.float64)
    plain = value_loss(value, old, target, None)
    assert plain.item() == pytest.approx(3.75, abs=1e-12)
    plain.backward()
    np.testing.assert_allclose(value.grad.numpy(), [0.5, -0.5, -1.0, 1.5], atol=1e-12)
    value.grad = None
    clipped = value_loss(value, old, target, 0.2)
    assert clipped.item() == pytest.approx(5.8175, abs=1e-12)
    clipped.backward()
    np.testing.assert_allclose(value.grad.numpy(), [0.0, 0.0, 0.0, 1.5], atol=1e-12)


def test_normalize():
    out = normalize(torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64))
    std = math.sqrt(5.0 / 3.0)  # unbiased std of 1..4
    np.testing.assert_allclose(out.numpy(), [(-1.5) / std, -0.5 / std, 0.5 / std, 1.5 / std], rtol=1e-7)
    assert torch.equal(normalize(torch.tensor([3.0])), torch.tensor([3.0]))  # one sample: unchanged, not nan


def test_log_prob_and_entropy_match_torch_distributions():
    gen = torch.Generator().manual_seed(0)
    logits, action = torch.randn(32, 5, generator=gen) * 3, torch.randint(0, 5, (32,), generator=gen)
    log_prob, entropy = categorical_log_prob_entropy(logits, action)
    reference = Categorical(logits=logits)
    torch.testing.assert_close(log_prob, reference.log_prob(action))
    torch.testing.assert_close(entropy, reference.entropy())
    mean, log_std, act = torch.randn(32, 3, generator=gen), torch.randn(3, generator=gen), torch.randn(32, 3, generator=gen)
    log_prob, entropy = gaussian_log_prob_entropy(mean, log_std, act)
    reference = Normal(mean, log_std.exp())
    torch.testing.assert_close(log_prob, reference.log_prob(act).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))


@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_update_reports_the_losses_of_its_batch(action):
    """lr = 0, one epoch, one minibatch: the reported numbers are the loss functions applied to the rollout
    with GAE targets, normalised advantages and ratio 1 (approx_kl = clipfrac = 0)."""
    policy = make_policy(action, lr=0.0, epochs=1, minibatch_size=1000, gamma=0.9, gae_lambda=0.8,
                         reward_scale=0.5, entropy_coef=0.01)
    data = make_rollout(policy, seed=4)
    obs = data["obs"].flatten(0, 1)
    with torch.no_grad():
        params, value = policy.ac(obs)
        next_value = policy.ac.value(data["next_obs"].flatten(0, 1)).view(8, 2)
        adv, target = compute_gae(data["reward"] * 0.5, data["value"], next_value, data["terminated"],
                                  data["truncated"], 0.9, 0.8)
        log_prob, entropy = policy._log_prob_entropy(params, data["action"].flatten(0, 1))
        expected_pl, _, _ = clipped_surrogate_loss(log_prob, data["log_prob"].flatten(), normalize(adv.flatten()), 0.2)
        expected_vl = value_loss(value, data["value"].flatten(), target.flatten(), None)
    info = host_info(policy._forward_learn(data))
    assert info["policy_loss"] == pytest.approx(expected_pl.item(), abs=1e-6)
    assert abs(info["policy_loss"]) < 1e-6  # ratio 1: -mean of normalised advantages
    assert info["value_loss"] == pytest.approx(expected_vl.item(), rel=1e-6)
    assert info["entropy"] == pytest.approx(entropy.mean().item(), rel=1e-6)
    assert info["approx_kl"] == pytest.approx(0.0, abs=1e-6) and info["clipfrac"] == 0.0


@pytest.mark.parametrize("minibatch_size", [4, 1000])
def test_advantage_normalisation_per_minibatch(minibatch_size):
    """lr = 0 (ratio 1 everywhere): with normalisation each minibatch's advantages have mean 0, so the
    surrogate is 0; without it the loss is -mean(A) over the rollout (equal-sized minibatches)."""
    normed = make_policy(lr=0.0, epochs=1, minibatch_size=minibatch_size)
    data = make_rollout(normed, seed=6)
    assert abs(host_info(normed._forward_learn(data))["policy_loss"]) < 1e-6
    raw = make_policy(lr=0.0, epochs=1, minibatch_size=minibatch_size, normalize_advantage=False)
    with torch.no_grad():
        next_value = raw.ac.value(data["next_obs"].flatten(0, 1)).view(8, 2)
    adv, _ = compute_gae(data["reward"], data["value"], next_value, data["terminated"], data["truncated"],
                         raw.cfg["gamma"], raw.cfg["gae_lambda"])
    assert host_info(raw._forward_learn(data))["policy_loss"] == pytest.approx(-adv.mean().item(), rel=1e-5)


def test_update_improves_advantage_weighted_likelihood_and_fits_values():
    policy = make_policy(epochs=4, gae_lambda=0.0, gamma=0.0, lr=3e-3)
    data = make_rollout(policy, T=16, N=4, seed=11)
    obs, act = data["obs"].flatten(0, 1), data["action"].flatten(0, 1).long()
    with torch.no_grad():
        before = Categorical(logits=policy.ac.actor(obs)).log_prob(act)
        value_before = policy.ac.value(obs)
    host_info(policy._forward_learn(data))
    with torch.no_grad():
        after = Categorical(logits=policy.ac.actor(obs)).log_prob(act)
        value_after = policy.ac.value(obs)
    reward = data["reward"].flatten()
    assert ((after - before) * (reward - value_before)).sum() > 0
    assert (value_after - reward).pow(2).mean() < (value_before - reward).pow(2).mean()


def test_clip_range_follows_lr_only_when_asked():
    fixed, follows = make_policy(clip_ratio=0.2), make_policy(clip_ratio=0.2, clip_follows_lr=True, lr=1e-3)
    for policy in (fixed, follows):
        assert policy._clip_ratio() == 0.2
        policy.optimizer.param_groups[0]["lr"] = policy.cfg["lr"] / 4  # as a linear decay would set it
    assert fixed._clip_ratio() == 0.2
    assert follows._clip_ratio() == pytest.approx(0.05)


# ------------------------------------------------------------------------------------ monitor keys
@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_monitor_vars_both_directions(action):
    """Every returned key is declared; every declared key appears (early_stop_epoch in a run where target_kl
    must stop updates); values are finite scalars."""
    policy = make_policy(action, target_kl=1e-7, epochs=5, minibatch_size=4, lr=1e-2)
    declared = policy.monitor_vars()
    assert set(declared) == EVERY_UPDATE | SPARSE and len(declared) == 7
    seen = set()
    for it in range(3):
        info = host_info(policy._forward_learn(make_rollout(policy, seed=it)))
        assert set(info) <= set(declared), set(info) - set(declared)
        assert EVERY_UPDATE <= set(info)
        for key, value in info.items():
            assert is_scalar(value) and math.isfinite(float(value)), (key, value)
        seen |= set(info)
    assert seen == set(declared)


@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_no_early_stop_key_without_target_kl(action):
    """target_kl=None (or one never exceeded): every epoch runs, early_stop_epoch never appears. Without
    target_kl it is not declared either (no '-' column, no "never reported" warning); every declared key
    appears on every update."""
    assert set(make_policy(action).monitor_vars()) == EVERY_UPDATE
    assert set(make_policy(action, target_kl=0.01).monitor_vars()) == EVERY_UPDATE | SPARSE
    for target_kl in (None, 1e9):
        policy = make_policy(action, target_kl=target_kl, epochs=3, minibatch_size=4, lr=1e-2)
        steps = count_steps(policy)
        for it in range(3):
            info = host_info(policy._forward_learn(make_rollout(policy, seed=it)))
            assert set(info) == EVERY_UPDATE, (target_kl, set(info))
        assert len(steps) == 3 * 3 * 4  # 3 updates x 3 epochs x 16 rows / 4 per minibatch


def test_target_kl_stops_before_the_step_that_would_exceed_it():
    """One minibatch per epoch: epoch 1 steps with ratio 1 (approx_kl ~ 0); in epoch 2 the policy has moved,
    approx_kl > 1.5 * target_kl, so the update stops there: early_stop_epoch = 2 after exactly one step."""
    policy = make_policy(target_kl=1e-7, epochs=5, minibatch_size=1000, lr=1e-2)
    steps = count_steps(policy)
    info = host_info(policy._forward_learn(make_rollout(policy, seed=2)))
    assert info["early_stop_epoch"] == 2 and len(steps) == 1
    # the statistics average both evaluated minibatches: the stepped one (kl ~ 0) and the stopping one
    assert info["approx_kl"] > 1.5e-7 / 2


def test_target_kl_stops_inside_the_first_epoch():
    policy = make_policy(target_kl=1e-7, epochs=5, minibatch_size=4, lr=1e-2)
    steps = count_steps(policy)
    info = host_info(policy._forward_learn(make_rollout(policy, seed=2)))
    assert info["early_stop_epoch"] == 1 and len(steps) == 1  # the second minibatch already exceeds it


def test_same_seed_same_behaviour():
    a, b = make_policy(seed=3, minibatch_size=4), make_policy(seed=3, minibatch_size=4)
    ra, rb = make_rollout(a, seed=1), make_rollout(b, seed=1)
    for key in ra:
        assert torch.equal(ra[key], rb[key]), key
    assert host_info(a._forward_learn(ra)) == host_info(b._forward_learn(rb))


# --------------------------------------------------------------------------------------- actions
def test_continuous_actions_clipped_for_env_log_prob_of_unclipped():
    policy = make_policy("continuous", init_log_std=1.5)  # std ~4.5 with bounds [-2, 2]: most samples clip
    obs = np.random.default_rng(0).uniform(-1, 1, (256, 3)).astype(np.float32)
    out = policy._forward_collect(obs, envstep=0)
    action, env_action = out["action"], out["env_action"]
    assert action.shape == env_action.shape == (256, 2) and action.dtype == env_action.dtype == np.float32
    assert (np.abs(action) > 2).mean() > 0.3
    np.testing.assert_array_equal(env_action, np.clip(action, -2.0, 2.0))
    with torch.no_grad():
        mean, value = policy.ac(torch.as_tensor(obs))
        std = policy.ac.log_std.exp()
    expected = Normal(mean, std).log_prob(torch.as_tensor(action)).sum(-1).numpy()
    np.testing.assert_allclose(out["log_prob"], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["value"], value.numpy(), rtol=1e-6)
    eval_action = policy._forward_eval(obs)
    np.testing.assert_array_equal(eval_action, np.clip(mean.numpy(), -2.0, 2.0))


def test_discrete_actions_follow_the_policy_distribution():
    policy = make_policy("discrete")
    with torch.no_grad():
        policy.ac.actor.layers[-1].bias.copy_(torch.tensor([2.0, 0.0, -1.0]))
        policy.ac.actor.layers[-1].weight.zero_()
    obs = np.zeros((20000, 4), np.float32)
    out = policy._forward_collect(obs, envstep=0)
    assert out["action"].dtype == np.int64 and "env_action" not in out
    freq = np.bincount(out["action"], minlength=3) / len(obs)
    probs = torch.softmax(torch.tensor([2.0, 0.0, -1.0]), 0).numpy()
    np.testing.assert_allclose(freq, probs, atol=0.015)
    np.testing.assert_allclose(out["log_prob"], np.log(probs)[out["action"]], rtol=1e-5)
    np.testing.assert_array_equal(policy._forward_eval(obs[:5]), np.zeros(5, np.int64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_runs_on_cuda_like_on_cpu(action):
    """The same seed on CUDA and CPU: same declared keys, finite values, the networks on the device, and the
    losses of the first update within float tolerance of the CPU ones (same rollout, same minibatch order)."""
    obs_space, act_space = DISCRETE if action == "discrete" else CONTINUOUS
    cpu = PPOPolicy({**SMALL, "target_kl": 1e-7, "minibatch_size": 4}, obs_space, act_space, seed=0)
    gpu = PPOPolicy({**SMALL, "target_kl": 1e-7, "minibatch_size": 4}, obs_space, act_space, device="cuda", seed=0)
    assert all(p.is_cuda for p in gpu.ac.parameters())
    data = make_rollout(cpu, seed=1)
    info_cpu, info_gpu = host_info(cpu._forward_learn(data)), host_info(gpu._forward_learn(data))
    assert set(info_gpu) == set(info_cpu) and set(info_gpu) <= set(gpu.monitor_vars())
    for key in info_cpu:
        assert info_gpu[key] == pytest.approx(info_cpu[key], rel=1e-3, abs=1e-5), key
    out = gpu._forward_collect(data["obs"][0].numpy(), envstep=0)
    assert out["action"].shape[0] == data["obs"].shape[1]


# ----------------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_state_dict_round_trip_is_exact(action):
    policy = make_policy(action, seed=1, minibatch_size=4)
    host_info(policy._forward_learn(make_rollout(policy, seed=0)))
    buffer = io.BytesIO()
    torch.save(policy.state_dict(), buffer)
    buffer.seek(0)
    restored = make_policy(action, seed=99, minibatch_size=4)
    restored.load_state_dict(torch.load(buffer, weights_only=False))
    assert host_info(policy._forward_learn(make_rollout(policy, seed=5))) == host_info(restored._forward_learn(make_rollout(restored, seed=5)))
    for (key, pa), pb in zip(policy.ac.state_dict().items(), restored.ac.state_dict().values()):
        assert torch.equal(pa, pb), key


# -------------------------------------------------------------------------------------- bad input
def test_bad_config_is_named():
    with pytest.raises(PolicyConfigError, match="epoch"):
        make_policy(epoch=3)
    with pytest.raises(PolicyConfigError, match="policy.epochs"):
        make_policy(epochs=0)
    with pytest.raises(PolicyConfigError, match="policy.target_kl"):
        make_policy(target_kl=0.0)
    with pytest.raises(PolicyConfigError, match="policy.clip_value"):
        make_policy(clip_value=-1.0)
    with pytest.raises(PolicyConfigError, match="policy.normalize_advantage"):
        make_policy(normalize_advantage="yes")
    with pytest.raises(PolicyConfigError, match="policy.hidden_sizes"):
        make_policy(hidden_sizes=[64, 0])
    with pytest.raises(TypeError, match="action space"):
        PPOPolicy({}, DISCRETE[0], spaces.MultiBinary(3))


def test_bad_rollout_is_named():
    policy = make_policy()
    data = make_rollout(policy)
    before = [p.clone() for p in policy.ac.parameters()]
    with pytest.raises(KeyError, match="log_prob"):
        host_info(policy._forward_learn({k: v for k, v in data.items() if k != "log_prob"}))
    bad = dict(data, reward=data["reward"].clone())
    bad["reward"][3, 1] = float("nan")
    with pytest.raises(ValueError, match="'reward'"):
        host_info(policy._forward_learn(bad))
    with pytest.raises(ValueError, match="'value'"):
        host_info(policy._forward_learn(dict(data, value=data["value"][:4])))
    assert all(torch.equal(a, b) for a, b in zip(before, policy.ac.parameters()))  # nothing was half-trained


def test_registered_as_ppo():
    import policies

    assert get_policy_class("ppo") is PPOPolicy is policies.PPOPolicy
    assert PPOPolicy.on_policy is True


# ------------------------------------------------------------------------- bundled configs, CLI
@pytest.mark.parametrize("name", ["ppo_cartpole", "ppo_pendulum"])
def test_bundled_configs_set_every_policy_key(name):
    from rlearn.config import load_config

    cfg = load_config(name)
    assert cfg["policy"]["type"] == "ppo"
    assert set(cfg["policy"]) - {"type"} == set(PPOPolicy.default_config)


def _scalars(tb_dir: Path) -> dict:
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_cli_short_run_with_target_kl(tmp_path):
    """``python -m rlearn train ppo_cartpole`` as a user runs it (8 updates, tiny target_kl): every key
    reaches TensorBoard on both axes, early_stop_epoch included, and the run writes its checkpoint."""
    work = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "rlearn", "train", "ppo_cartpole", "--work-dir", str(work), "--set",
         "train.max_env_steps=2048", "policy.target_kl=0.0001", "learner.log_freq=4", "learner.monitor_window=4",
         "eval.freq=none", "eval.episodes=2", "eval.num_envs=2"],
        capture_output=True, text=True, cwd=ROOT, timeout=240,
        env={**os.environ, "RLEARN_NO_PROGRESS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    tb = next(work.rglob("events.out.tfevents*")).parent
    points = _scalars(tb)
    for key in EVERY_UPDATE | SPARSE | {"cur_lr"}:
        assert [step for step, _ in points[f"learner_iter/{key}_avg"]] == [4, 8], key
        assert len(points[f"learner_step/{key}_avg"]) == 2, key
    # the learning rate decays linearly (rl-zoo's lin_1e-3): 1e-3 * (1 - i / 391) averaged over iterations
    expected = [sum(1e-3 * (1 - i / 391) for i in range(lo, lo + 4)) / 4 for lo in (0, 4)]
    assert [v for _, v in points["learner_iter/cur_lr_avg"]] == pytest.approx(expected, rel=1e-5)
    assert all(1 <= v <= 20 for _, v in points["learner_iter/early_stop_epoch_avg"])
    log = (work / "ppo_cartpole.log").read_text()
    assert "early_stop_epoch_avg" in log and "has never been reported" not in log
    assert (work / "ckpt").is_dir() and any((work / "ckpt").iterdir())


def test_cli_short_run_without_target_kl_has_no_early_stop_column(tmp_path):
    work = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "rlearn", "train", "ppo_cartpole", "--work-dir", str(work), "--set",
         "train.max_env_steps=1024", "learner.log_freq=2", "eval.freq=none", "eval.episodes=2", "eval.num_envs=2"],
        capture_output=True, text=True, cwd=ROOT, timeout=240, env={**os.environ, "RLEARN_NO_PROGRESS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    points = _scalars(next(work.rglob("events.out.tfevents*")).parent)
    assert [step for step, _ in points["learner_iter/policy_loss_avg"]] == [2, 4]
    assert not any("early_stop" in tag for tag in points)
    log = (work / "ppo_cartpole.log").read_text()
    assert "policy_loss_avg" in log and "early_stop" not in log and "WARNING" not in log


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 20 s on an idle core, several minutes on a loaded shared machine
def test_cartpole_reaches_500_within_100k_steps(tmp_path):
    """The bundled config (rl-zoo settings), seed 0: an evaluation of 10 deterministic episodes reaches the
    maximum return of 500 within the 100k-step budget."""
    from rlearn.config import load_config
    from rlearn.run import train

    cfg = load_config("ppo_cartpole", ["checkpoint.freq=none", "seed=0"])
    result = train(cfg, work_dir=tmp_path / "run", progress=False)
    returns = [value for _, value in _scalars(result.tb_dir)["evaluator_step/episode_return_mean"]]
    assert result.envstep <= 100_096 and len(returns) == 20
    assert max(returns) == 500.0, returns


# ----------------------------------------------------------------------------------------- networks
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_actor_critic_is_two_orthogonally_initialised_mlps(activation):
    """Actor and critic are rlearn.nn's MLP with the activation asked for, orthogonal weights (gain sqrt(2),
    output 0.01 / 1) and zero biases; forward gives both heads."""
    from rlearn.nn import MLP

    net = ppo_module.ActorCritic(4, 3, [64, 64], activation, continuous=False, init_log_std=0.0)
    assert type(net.actor) is MLP and net.actor.activation == activation and net.critic.activation == activation
    for mlp, out_gain in ((net.actor, 0.01), (net.critic, 1.0)):
        for layer, gain in zip(mlp.layers, [math.sqrt(2.0), math.sqrt(2.0), out_gain]):
            w = layer.weight.detach()
            rows = min(w.shape)
            gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
            torch.testing.assert_close(gram, gain**2 * torch.eye(rows), rtol=1e-4, atol=1e-6)
            assert torch.count_nonzero(layer.bias) == 0
    for batch in (8, 256):
        obs = torch.randn(batch, 4)
        logits, value = net(obs)
        assert torch.equal(logits, net.actor(obs)) and torch.equal(value, net.critic(obs).squeeze(-1))
        assert torch.equal(net.value(obs), value)
