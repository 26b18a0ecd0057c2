"""PPGPolicy: irregular monitor keys, GAE, the auxiliary phase, action handling, checkpoints."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gymnasium import spaces
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.distributions import Categorical, Normal, kl_divergence

from policies import PolicyConfigError, get_policy_class, is_scalar
from policies.ppg import PPGPolicy, behavioral_cloning_kl
from tests.policies.rollouts import CONTINUOUS, DISCRETE, make_rollout
from tests.policies.reports import host_info

AUX_KEYS = {"aux_value_loss", "behavioral_cloning_loss", "auxiliary_loss"}
EVERY_ITER_KEYS = {"policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance", "cur_lr"}

SMALL = dict(hidden_sizes=[16], rollout_steps=8, minibatch_size=8, aux_minibatch_size=16, e_policy=2, e_value=2, e_aux=2)


def make_policy(action="discrete", seed=0, **cfg):
    obs_space, act_space = DISCRETE if action == "discrete" else CONTINUOUS
    return PPGPolicy({**SMALL, **cfg}, obs_space, act_space, seed=seed)


# ------------------------------------------------------------------------------------ monitor keys
@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_monitor_vars_both_directions(action):
    """Every returned key is declared, every declared key appears within n_pi iterations, values are finite scalars."""
    n_pi = 3
    policy = make_policy(action, n_pi=n_pi)
    declared = policy.monitor_vars()
    assert set(declared) == EVERY_ITER_KEYS | AUX_KEYS and len(declared) == 10
    seen = set()
    for it in range(n_pi):
        info = host_info(policy._forward_learn(make_rollout(policy, seed=it)))
        assert set(info) <= set(declared), set(info) - set(declared)
        for key, value in info.items():
            assert is_scalar(value) and math.isfinite(float(value)), (key, value)
        seen |= set(info)
    assert seen == set(declared)


def test_aux_phase_every_n_pi_iterations_and_clears_store():
    n_pi = 3
    policy = make_policy(n_pi=n_pi)
    for it in range(1, 3 * n_pi + 2):
        info = host_info(policy._forward_learn(make_rollout(policy, seed=it)))
        has_aux = it % n_pi == 0
        assert (AUX_KEYS <= set(info)) == has_aux and (AUX_KEYS & set(info) == set()) == (not has_aux), it
        assert EVERY_ITER_KEYS <= set(info)
        assert len(policy._aux_obs) == it % n_pi
        assert policy.policy_iterations == it


def test_aux_phase_uses_every_stored_observation():
    """The auxiliary phase trains on the concatenation of the n_pi stored rollouts (T * N * n_pi rows)."""
    policy = make_policy(n_pi=2, e_aux=1, aux_minibatch_size=1000)
    seen_rows = []
    original = policy.policy_net.forward

    def spy(obs):
        seen_rows.append(obs.shape[0])
        return original(obs)

    host_info(policy._forward_learn(make_rollout(policy, seed=1)))
    policy.policy_net.forward = spy
    host_info(policy._forward_learn(make_rollout(policy, seed=2)))
    # last two calls: pi_old over all 32 stored rows, then one aux minibatch with all 32 rows
    assert seen_rows[-2:] == [2 * 8 * 2, 2 * 8 * 2]


# -------------------------------------------------------------------------------------------- GAE
# compute_gae and explained_variance themselves are tested in tests/rl/test_advantages.py; this reference
# checks the value targets PPG stores
def naive_gae(reward, value, next_value, terminated, truncated, gamma, lam):
    """Reference: A[t] = sum_l (gamma*lam)^l delta[t+l] over the rest of the episode inside the rollout."""
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


def test_policy_value_targets_bootstrap_from_next_obs():
    """The stored value targets are GAE returns with V of the *final* observation at truncations (not V of
    the next episode's first obs), zero at terminations, and the collect-time values."""
    policy = make_policy(n_pi=100, gamma=0.9, gae_lambda=0.7, reward_scale=0.5)
    data = make_rollout(policy, T=8, N=3, seed=5, done_prob=0.4)
    assert data["terminated"].sum() > 0 and data["truncated"].sum() > 0
    with torch.no_grad():
        next_value = policy.value_net(data["next_obs"])
        value_now = policy.value_net(data["obs"])
    np.testing.assert_allclose(data["value"].numpy(), value_now.numpy(), rtol=1e-6, atol=1e-6)
    adv = naive_gae(
        (data["reward"] * 0.5).tolist(), data["value"].tolist(), next_value.tolist(),
        data["terminated"].tolist(), data["truncated"].tolist(), 0.9, 0.7,
    )
    host_info(policy._forward_learn(data))
    expected_targets = (torch.tensor(adv) + data["value"]).flatten()
    np.testing.assert_allclose(policy._aux_targets[0].numpy(), expected_targets.numpy(), rtol=1e-5, atol=1e-5)


def test_both_value_heads_regress_on_the_same_stored_targets():
    """Exact numbers on a tiny rollout: in the auxiliary phase the policy network's aux head and the value
    network both regress on the stored GAE targets V_targ (reward-scaled, from the collect-time values), the
    targets the value phase used -- not raw returns, not targets recomputed with another value function."""
    policy = make_policy(n_pi=1, e_policy=0, e_value=0, lr=0.0, gamma=0.9, gae_lambda=0.7, reward_scale=0.5,
                         aux_minibatch_size=1000, e_aux=1)  # lr = 0: nothing moves, one minibatch = every row
    data = make_rollout(policy, T=4, N=2, seed=5, done_prob=0.4)
    obs = data["obs"].flatten(0, 1)
    with torch.no_grad():
        next_value = policy.value_net(data["next_obs"])
        aux_pred = policy.policy_net(obs)[1]
        value_pred = policy.value_net(obs)
    adv = naive_gae((data["reward"] * 0.5).tolist(), data["value"].tolist(), next_value.tolist(),
                    data["terminated"].tolist(), data["truncated"].tolist(), 0.9, 0.7)
    v_targ = (torch.tensor(adv) + data["value"]).flatten()
    steps = []
    step = policy.optimize
    policy.optimize = lambda loss, *rest, **kw: steps.append((loss.item(), rest)) or step(loss, *rest, **kw)
    info = host_info(policy._forward_learn(data))
    expected_aux = 0.5 * (aux_pred - v_targ).pow(2).mean().item()
    expected_value = 0.5 * (value_pred - v_targ).pow(2).mean().item()
    assert info["aux_value_loss"] == pytest.approx(expected_aux, rel=1e-6)
    assert info["value_loss"] == pytest.approx(expected_value, rel=1e-6)  # e_value = 0: the untouched net's loss
    assert info["behavioral_cloning_loss"] == 0.0 and info["auxiliary_loss"] == info["aux_value_loss"]
    # the aux phase's two steps: the policy network on aux + bc, then the value network on the same V_targ
    assert [loss for loss, _ in steps] == pytest.approx([expected_aux, expected_value], rel=1e-6)
    # and a reward_scale of 1 doubles nothing but the rewards: the targets are not rescaled afterwards
    assert abs(v_targ).max() > 0


def test_aux_phases_of_the_bundled_cartpole_config_fit_the_aux_head():
    """With e_aux=1 and minibatches of 512 (8 Adam steps per phase) the aux head stays near its initial output
    while CartPole's targets rise towards 5, so aux_value_loss grows from phase to phase (1.7 -> 9.3 over 20k
    steps; docs/ppg.md). With the bundled settings, phases on
    CartPole-scale targets (mean ~4.5) fit the head: the first halves the loss at least (e_aux=1: 9.6 of 10.2),
    the second brings it near the targets' spread (e_aux=1: 8.9)."""
    from rlearn.config import load_config

    cfg = load_config("ppg_cartpole")
    policy_cfg = {k: v for k, v in cfg["policy"].items() if k != "type"}
    policy = PPGPolicy(policy_cfg, spaces.Box(-5.0, 5.0, (4,), np.float32), spaces.Discrete(2), seed=0)
    rng = np.random.default_rng(0)
    rows = cfg["policy"]["n_pi"] * cfg["policy"]["rollout_steps"] * cfg["env"]["num_envs"]
    obs = torch.as_tensor(rng.normal(0.0, [0.5, 0.8, 0.1, 0.8], (rows, 4)), dtype=torch.float32)
    targets = 4.5 + 0.4 * torch.tanh(obs @ torch.tensor([1.0, -0.5, 2.0, 0.3]))  # like CartPole's late targets

    def aux_loss():
        with torch.no_grad():
            return 0.5 * (policy.policy_net(obs)[1] - targets).pow(2).mean().item()

    losses, infos = [aux_loss()], []
    for _ in range(2):
        policy._aux_obs, policy._aux_targets = [obs], [targets]  # one stored cycle per phase
        infos.append(policy._auxiliary_phase())
        losses.append(aux_loss())
    assert losses[0] > 8.0  # the head starts near 0
    assert losses[1] < losses[0] / 2, losses
    assert losses[2] < 0.05, losses
    assert infos[1]["aux_value_loss"] < infos[0]["aux_value_loss"]  # the reported loss falls, phase to phase
    assert all(info["behavioral_cloning_loss"] < 1e-2 for info in infos)  # the policy stayed where it was


# ------------------------------------------------------------------------------------------ KL / BC
@pytest.mark.parametrize("discrete,width", [(True, 5), (False, 6)])
def test_kl_is_zero_for_identical_distributions(discrete, width):
    params = torch.randn(64, width) * 3
    kl = behavioral_cloning_kl(params, params.clone(), discrete)
    assert torch.equal(kl, torch.zeros(64))


def test_kl_matches_torch_on_ordinary_inputs():
    old, new = torch.randn(32, 4), torch.randn(32, 4)
    expected = kl_divergence(Categorical(logits=old), Categorical(logits=new))
    torch.testing.assert_close(behavioral_cloning_kl(old, new, True), expected)
    old_c, new_c = torch.randn(32, 6), torch.randn(32, 6)
    expected_c = kl_divergence(
        Normal(old_c[:, :3], old_c[:, 3:].exp()), Normal(new_c[:, :3], new_c[:, 3:].exp())
    ).sum(-1)
    torch.testing.assert_close(behavioral_cloning_kl(old_c, new_c, False), expected_c)
    assert (behavioral_cloning_kl(old, new, True) > 0).all()


def test_bc_loss_finite_for_near_deterministic_policies():
    """Tiny probabilities that underflow to 0 in float32: DI-engine's kl_div of sampled log-probs is NaN and
    torch's categorical KL is inf; ours is finite and exact."""
    old = torch.tensor([[0.0, -200.0, -300.0], [50.0, -60.0, 0.0]])
    new = torch.tensor([[0.0, -250.0, -120.0], [50.0, 0.0, -70.0]])
    action = torch.tensor([2, 2])  # rarely sampled actions: log-probs of -300 and -50
    logp_old = Categorical(logits=old).log_prob(action)
    logp_new = Categorical(logits=new).log_prob(action)
    assert torch.isnan(F.kl_div(logp_new, logp_old, reduction="batchmean"))  # DI-engine's formula
    assert torch.isinf(kl_divergence(Categorical(logits=old), Categorical(logits=new))).any()
    ours = behavioral_cloning_kl(old, new, True)
    assert torch.isfinite(ours).all()
    # exact value: p_old puts all its (float32) mass on one action, where both log-probs are ~0
    torch.testing.assert_close(ours, torch.zeros(2), atol=1e-12, rtol=0)
    # a real difference stays finite and large rather than becoming inf
    big = behavioral_cloning_kl(torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, -300.0]]), True)
    torch.testing.assert_close(big, torch.tensor([150.0 - math.log(2.0)]), rtol=1e-6, atol=0)


def test_aux_phase_of_near_deterministic_policy_is_finite():
    policy = make_policy(n_pi=1)
    with torch.no_grad():
        policy.policy_net.action_head.layers[0].weight.mul_(1e5)  # logits differ by thousands: probabilities underflow
    data = make_rollout(policy, seed=3)
    with torch.no_grad():
        probs = torch.softmax(policy.policy_net(data["obs"].flatten(0, 1))[0], -1)
    assert (probs == 0).any(), "the setup must produce probabilities that underflow to exactly 0"
    info = host_info(policy._forward_learn(data))
    assert AUX_KEYS <= set(info)
    assert all(math.isfinite(v) for k, v in info.items() if k != "explained_variance"), info


@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_bc_loss_is_zero_when_policy_cannot_change(action):
    """lr = 0: the policy is unchanged through the auxiliary phase, so KL(pi_old || pi_new) is exactly 0."""
    policy = make_policy(action, n_pi=2, lr=0.0)
    host_info(policy._forward_learn(make_rollout(policy, seed=1)))
    info = host_info(policy._forward_learn(make_rollout(policy, seed=2)))
    assert info["behavioral_cloning_loss"] == 0.0
    assert info["auxiliary_loss"] == info["aux_value_loss"] > 0.0


def test_bc_term_keeps_policy_close():
    """With a large beta_clone the auxiliary phase barely moves the policy; with beta_clone=0 it drifts more."""
    drift = {}
    for beta in (0.0, 100.0):
        policy = make_policy(n_pi=1, beta_clone=beta, e_policy=0, e_aux=8, aux_minibatch_size=4, lr=1e-2)
        with torch.no_grad():
            policy.policy_net.action_head.layers[0].weight.mul_(100.0)  # logits that depend on the shared trunk
        data = make_rollout(policy, seed=7)
        obs = data["obs"].flatten(0, 1)
        with torch.no_grad():
            before = policy.policy_net(obs)[0]
        host_info(policy._forward_learn(data))
        with torch.no_grad():
            drift[beta] = behavioral_cloning_kl(before, policy.policy_net(obs)[0], True).mean().item()
    assert drift[100.0] < drift[0.0] / 5


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
        mean, log_std = policy.policy_net(torch.as_tensor(obs))[0].chunk(2, -1)
    expected = Normal(mean, log_std.exp()).log_prob(torch.as_tensor(action)).sum(-1).numpy()
    np.testing.assert_allclose(out["log_prob"], expected, rtol=1e-5, atol=1e-5)
    clipped_lp = Normal(mean, log_std.exp()).log_prob(torch.as_tensor(env_action)).sum(-1).numpy()
    assert not np.allclose(out["log_prob"], clipped_lp)
    eval_action = policy._forward_eval(obs)
    np.testing.assert_array_equal(eval_action, np.clip(mean.numpy(), -2.0, 2.0))


def test_discrete_actions_follow_the_policy_distribution():
    policy = make_policy("discrete")
    with torch.no_grad():
        policy.policy_net.action_head.layers[0].bias.copy_(torch.tensor([2.0, 0.0, -1.0]))
        policy.policy_net.action_head.layers[0].weight.zero_()
    obs = np.zeros((20000, 4), np.float32)
    out = policy._forward_collect(obs, envstep=0)
    assert out["action"].dtype == np.int64 and "env_action" not in out
    freq = np.bincount(out["action"], minlength=3) / len(obs)
    probs = torch.softmax(torch.tensor([2.0, 0.0, -1.0]), 0).numpy()
    np.testing.assert_allclose(freq, probs, atol=0.015)
    np.testing.assert_allclose(out["log_prob"], np.log(probs)[out["action"]], rtol=1e-5)
    np.testing.assert_array_equal(policy._forward_eval(obs[:5]), np.zeros(5, np.int64))


def test_same_seed_same_behaviour():
    a, b = make_policy(seed=3), make_policy(seed=3)
    ra, rb = make_rollout(a, seed=1), make_rollout(b, seed=1)
    for key in ra:
        assert torch.equal(ra[key], rb[key]), key
    assert host_info(a._forward_learn(ra)) == host_info(b._forward_learn(rb))


# ---------------------------------------------------------------------------------------- learning
def test_cur_lr_is_the_rate_the_iteration_used():
    """A scheduler (the learner's LRSchedulerHook) changes the optimizers' lr between iterations;
    cur_lr reports the rate in effect, not the configured one."""
    policy = make_policy(n_pi=2, lr=1e-3)
    assert host_info(policy._forward_learn(make_rollout(policy, seed=0)))["cur_lr"] == 1e-3
    for optimizer in policy.optimizers().values():
        optimizer.param_groups[0]["lr"] = 2.5e-4
    assert host_info(policy._forward_learn(make_rollout(policy, seed=1)))["cur_lr"] == 2.5e-4


def test_clip_range_follows_lr_only_when_asked():
    fixed, follows = make_policy(clip_ratio=0.2), make_policy(clip_ratio=0.2, clip_follows_lr=True)
    for policy in (fixed, follows):
        assert policy._clip_ratio() == 0.2
        for optimizer in policy.optimizers().values():
            optimizer.param_groups[0]["lr"] = 0.25e-3  # a quarter of lr=1e-3, as a linear decay would set it
    assert fixed._clip_ratio() == 0.2
    assert follows._clip_ratio() == pytest.approx(0.05)
    with pytest.raises(PolicyConfigError, match="clip_follows_lr"):
        make_policy(clip_follows_lr="yes")


def test_policy_phase_improves_advantage_weighted_likelihood():
    """One policy phase makes the actions with positive advantage more likely (a learning sanity check)."""
    policy = make_policy(n_pi=100, e_policy=4, gae_lambda=0.0, gamma=0.0)
    data = make_rollout(policy, T=16, N=4, seed=11)
    data["value"].zero_()
    obs, act = data["obs"].flatten(0, 1), data["action"].flatten(0, 1).long()
    with torch.no_grad():
        before = Categorical(logits=policy.policy_net(obs)[0]).log_prob(act)
    host_info(policy._forward_learn(data))
    with torch.no_grad():
        after = Categorical(logits=policy.policy_net(obs)[0]).log_prob(act)
    reward = data["reward"].flatten()
    assert ((after - before) * reward).sum() > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_runs_on_cuda_like_on_cpu(action):
    """The same seed on CUDA and CPU: the networks, optimizer state and aux store on the device, the same keys,
    losses of a policy iteration and an auxiliary phase within float tolerance of the CPU ones (same rollouts,
    same minibatch order), fused Adam, and a CUDA checkpoint that a CPU policy loads."""
    obs_space, act_space = DISCRETE if action == "discrete" else CONTINUOUS
    cpu = PPGPolicy({**SMALL, "n_pi": 2}, obs_space, act_space, seed=0)
    gpu = PPGPolicy({**SMALL, "n_pi": 2}, obs_space, act_space, device="cuda", seed=0)
    assert all(p.is_cuda for m in gpu.modules().values() for p in m.parameters())
    assert all(opt.param_groups[0]["fused"] for opt in gpu.optimizers().values())
    collector = make_policy(action, n_pi=2)  # collects for both, so their generators draw the same minibatches
    for it in range(2):
        data = make_rollout(collector, seed=it)
        info_cpu, info_gpu = host_info(cpu._forward_learn(data)), host_info(gpu._forward_learn(data))
        assert set(info_gpu) == set(info_cpu) and set(info_gpu) <= set(gpu.monitor_vars())
        for key in info_cpu:
            assert info_gpu[key] == pytest.approx(info_cpu[key], rel=1e-3, abs=1e-5), (it, key)
        if it == 0:
            assert gpu._aux_obs[0].is_cuda and gpu._aux_targets[0].is_cuda
    assert AUX_KEYS <= set(info_gpu)
    out = gpu._forward_collect(data["obs"][0].numpy(), envstep=0)
    assert out["log_prob"].dtype == out["value"].dtype == np.float32 and out["value"].shape == (2,)
    buffer = io.BytesIO()
    torch.save(gpu.state_dict(), buffer)
    buffer.seek(0)
    restored = make_policy(action, n_pi=2)
    restored.load_state_dict(torch.load(buffer, map_location="cpu", weights_only=False))
    for name, module in gpu.modules().items():
        for key, value in module.state_dict().items():
            torch.testing.assert_close(restored.modules()[name].state_dict()[key], value.cpu())


@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_adam_step_shortcut_changes_nothing(action):
    """The optimizers step through AdamStep: where it calls the fused kernel directly (value and aux optimizers
    without an LR scheduler) the losses and parameters are bit for bit those of optimizer.step()."""
    direct, plain = make_policy(action, n_pi=2, seed=4), make_policy(action, n_pi=2, seed=4)
    for optimizer in plain.optimizers().values():
        plain.adam_step(optimizer).direct = False  # every step through optimizer.step()
    for it in range(4):
        data = make_rollout(direct, seed=it)
        make_rollout(plain, seed=it)  # the same draws from plain's generator
        assert host_info(direct._forward_learn(data)) == host_info(plain._forward_learn(data)), it
    assert direct.adam_step(direct.value_optimizer).direct_steps > 0
    assert direct.adam_step(direct.aux_optimizer).direct_steps > 0
    assert plain.adam_step(plain.value_optimizer).direct_steps == plain.adam_step(plain.aux_optimizer).direct_steps == 0
    for name, module in direct.modules().items():
        for (key, a), b in zip(module.state_dict().items(), plain.modules()[name].state_dict().values()):
            assert torch.equal(a, b), (name, key)


# ----------------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("action", ["discrete", "continuous"])
def test_state_dict_round_trip_mid_cycle_is_exact(action):
    """Resume after 2 of n_pi=3 iterations: the next aux phase uses the restored store, results are identical."""
    policy = make_policy(action, n_pi=3, seed=1)
    for it in range(2):
        host_info(policy._forward_learn(make_rollout(policy, seed=it)))
    buffer = io.BytesIO()
    torch.save(policy.state_dict(), buffer)
    buffer.seek(0)
    restored = make_policy(action, n_pi=3, seed=99)
    restored.load_state_dict(torch.load(buffer, weights_only=False))
    assert len(restored._aux_obs) == 2 and restored.policy_iterations == 2

    info_a = host_info(policy._forward_learn(make_rollout(policy, seed=5)))
    info_b = host_info(restored._forward_learn(make_rollout(restored, seed=5)))
    assert AUX_KEYS <= set(info_a)
    assert info_a == info_b
    for name, module in policy.modules().items():
        for (key, pa), pb in zip(module.state_dict().items(), restored.modules()[name].state_dict().values()):
            assert torch.equal(pa, pb), (name, key)


def test_load_state_dict_rejects_mismatch():
    policy = make_policy()
    state = policy.state_dict()
    del state["extra"]["aux_obs"]
    with pytest.raises(KeyError, match="aux_obs"):
        make_policy().load_state_dict(state)
    state = policy.state_dict()
    state["modules"].pop("value_net")
    with pytest.raises(ValueError, match="value_net"):
        make_policy().load_state_dict(state)


# -------------------------------------------------------------------------------------- bad input
def test_bad_config_is_named():
    with pytest.raises(PolicyConfigError, match="n_pie"):
        make_policy(n_pie=3)
    with pytest.raises(PolicyConfigError, match="policy.n_pi"):
        make_policy(n_pi=0)
    with pytest.raises(PolicyConfigError, match="policy.gae_lambda"):
        make_policy(gae_lambda=1.5)
    with pytest.raises(PolicyConfigError, match="policy.hidden_sizes"):
        make_policy(hidden_sizes=[64, 0])
    with pytest.raises(TypeError, match="action space"):
        PPGPolicy({}, DISCRETE[0], spaces.MultiBinary(3))


def test_bad_rollout_is_named():
    policy = make_policy()
    data = make_rollout(policy)
    with pytest.raises(KeyError, match="log_prob"):
        host_info(policy._forward_learn({k: v for k, v in data.items() if k != "log_prob"}))
    bad = dict(data, reward=data["reward"].clone())
    bad["reward"][3, 1] = float("nan")
    with pytest.raises(ValueError, match="'reward'"):
        host_info(policy._forward_learn(bad))
    with pytest.raises(ValueError, match="'value'"):
        host_info(policy._forward_learn(dict(data, value=data["value"][:4])))
    assert policy.policy_iterations == 0 and len(policy._aux_obs) == 0  # nothing was half-recorded


def test_registered_as_ppg():
    assert get_policy_class("ppg") is PPGPolicy
    assert PPGPolicy.on_policy is True


# ------------------------------------------------------------------------- bundled configs, run
@pytest.mark.parametrize("name", ["ppg_cartpole", "ppg_pendulum"])
def test_bundled_config_windows_hold_whole_aux_cycles(name):
    """DI-engine's documented pitfall: a window shorter than n_pi shows the aux losses in only some tables. The bundled
    configs log right after each aux phase and average over a whole number (>= 1) of aux cycles."""
    from rlearn.config import load_config

    cfg = load_config(name)
    n_pi, learner = cfg["policy"]["n_pi"], cfg["learner"]
    assert cfg["policy"]["type"] == "ppg"
    assert learner["monitor_window"] >= n_pi and learner["monitor_window"] % n_pi == 0
    assert learner["log_freq"] % n_pi == 0
    assert not learner["monitor_windows"]  # no per-key window overrides the aux keys' window


def _scalars(tb_dir: Path) -> dict:
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_run_tensorboard_aux_averages_are_real(tmp_path):
    """ppg_cartpole through the run (tiny epochs): every logged point of an aux loss is the mean of
    the aux values in its 32-iteration window (1 value at iteration 16, 2 at 32 and 48), never 0 or missing."""
    from rlearn.config import load_config
    from rlearn.run import Trainer

    cfg = load_config("ppg_cartpole", [
        "policy.e_policy=1", "policy.e_value=1", "policy.hidden_sizes=[16]", "train.max_env_steps=12288",
        "eval.freq=none", "eval.episodes=2", "eval.num_envs=2", "checkpoint.freq=none",
    ])
    trainer = Trainer(cfg, work_dir=tmp_path / "run", progress=False)
    infos = []
    forward_learn = trainer.policy._forward_learn
    trainer.policy._forward_learn = lambda data: infos.append(forward_learn(data)) or infos[-1]
    result = trainer.run()
    assert result.train_iter == len(infos) == 48
    points = _scalars(result.tb_dir)
    for key in ("aux_value_loss", "behavioral_cloning_loss", "auxiliary_loss", "policy_loss", "cur_lr"):
        logged = points[f"learner_iter/{key}_avg"]
        assert [step for step, _ in logged] == [16, 32, 48], key
        for step, value in logged:
            window = [float(info[key]) for info in infos[max(0, step - 32):step] if key in info]
            assert len(window) == (min(step, 32) if key in EVERY_ITER_KEYS else min(step, 32) // 16)
            assert value == pytest.approx(sum(window) / len(window), rel=1e-5), (key, step)
    assert all(value > 0 for _, value in points["learner_iter/aux_value_loss_avg"])


@pytest.mark.slow
def test_cartpole_learns_through_a_run(tmp_path):
    """One seed, 30k env steps of the bundled config: far better than a random policy (about 22)."""
    from rlearn.config import load_config
    from rlearn.run import train

    cfg = load_config("ppg_cartpole", ["train.max_env_steps=30000", "checkpoint.freq=none", "seed=0"])
    result = train(cfg, work_dir=tmp_path / "run", progress=False)
    returns = [value for _, value in _scalars(result.tb_dir)["evaluator_step/episode_return_mean"]]
    assert len(returns) == 6  # every 5000 env steps (the last one is also the end of the run)
    assert result.last_eval["episode_return_mean"] >= 150, returns
    assert max(returns) >= 400, returns
