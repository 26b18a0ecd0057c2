"""TD3Policy: monitored keys, the exact TD3 target, delayed updates, exploration, action scaling, state."""

from __future__ import annotations

import copy
import io
import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import PolicyConfigError, get_policy_class
from policies.td3 import TD3Policy
from tests.policies.precision_checks import check_bf16_precision
from tests.policies.reports import host_info, is_reported_number

OBS = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
ACT = spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32)
SMALL = dict(hidden_sizes=[16, 16], batch_size=8, learning_starts=0, lr_actor=1e-2, lr_critic=1e-2)


def make_policy(obs_space=OBS, act_space=ACT, seed=0, **cfg) -> TD3Policy:
    return TD3Policy({**SMALL, **cfg}, obs_space, act_space, seed=seed)


def make_batch(policy: TD3Policy, n: int = 8, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    obs_shape, act_shape = policy.obs_shape, policy.act_shape

    def t(shape, low=-1.0, high=1.0):
        return torch.as_tensor(rng.uniform(low, high, size=shape), dtype=torch.float32)

    return dict(
        obs=t((n, *obs_shape)),
        action=t((n, *act_shape)),
        reward=t((n,), -2.0, 0.0),
        next_obs=t((n, *obs_shape)),
        terminated=torch.as_tensor(rng.integers(0, 2, size=n), dtype=torch.float32),
    )


def params(module: torch.nn.Module) -> list:
    return [p.detach().clone() for p in module.parameters()]


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


# --------------------------------------------------------------------------------------- monitoring
@pytest.mark.parametrize("freq", [1, 2, 3])
def test_monitor_vars_both_directions(freq):
    """Every returned key is declared; every declared key shows up within actor_update_freq iterations."""
    policy = make_policy(actor_update_freq=freq)
    declared = policy.monitor_vars()
    assert declared == [
        "critic_loss", "critic_twin_loss", "q_value", "q_value_twin", "target_q_value", "td_error",
        "cur_lr_critic", "actor_loss", "cur_lr_actor",
    ]
    batch = make_batch(policy)
    infos = [policy._forward_learn(batch) for _ in range(3 * freq)]
    for i, info in enumerate(infos, start=1):
        assert set(info) <= set(declared), set(info) - set(declared)
        assert all(is_reported_number(v) and math.isfinite(float(v)) for v in info.values()), info
        actor_step = i % freq == 0
        assert ("actor_loss" in info) == actor_step and ("cur_lr_actor" in info) == actor_step
    for start in range(len(infos) - freq + 1):
        window = set().union(*infos[start:start + freq])
        assert window == set(declared), (start, set(declared) - window)


def test_reported_learning_rates_follow_the_optimizers():
    policy = make_policy(actor_update_freq=1, lr_actor=1e-3, lr_critic=2e-3)
    batch = make_batch(policy)
    info = host_info(policy._forward_learn(batch))
    assert (info["cur_lr_actor"], info["cur_lr_critic"]) == (1e-3, 2e-3)
    policy.optimizers()["critic"].param_groups[0]["lr"] = 5e-4  # what an LR scheduler hook does
    assert host_info(policy._forward_learn(batch))["cur_lr_critic"] == 5e-4


# ---------------------------------------------------------------------------------------- the target
def _set_linear(layer, weight, bias):
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(weight, dtype=torch.float32))
        layer.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))


def test_target_hand_made_case():
    """pi'(s') = 0.9 everywhere; Q1'(s, a) = 2 * relu(sum(s) + a) + 1, Q2'(s, a) = -relu(sum(s) + a) + 3."""
    policy = make_policy(hidden_sizes=[1], gamma=0.5, target_noise=1.0, target_noise_clip=0.3)
    first, last = policy.actor_target.layers
    _set_linear(first, np.zeros((1, 3)), [0.0])
    _set_linear(last, [[0.0]], [math.atanh(0.9)])
    layer0, layer1 = policy.critic_target.layers
    _set_linear(layer0, np.ones((2, 1, 4)), np.zeros((2, 1, 1)))
    _set_linear(layer1, [[[2.0]], [[-1.0]]], [[[1.0]], [[3.0]]])

    next_obs = torch.tensor([[0.1, 0.2, 0.3], [0.5, 0.5, 0.5], [-1.0, -1.0, -1.0], [0.0, 0.0, 0.0]])
    reward = torch.tensor([1.0, -1.0, 0.5, 2.0])
    terminated = torch.tensor([0.0, 1.0, 0.0, 0.0])  # sample 0 and 3: truncated or not, they bootstrap
    noise = torch.tensor([[0.3], [-0.3], [0.0], [-0.3]])  # already clipped to +-target_noise_clip
    y = policy.compute_target(reward, next_obs, terminated, noise)

    # a' = clip(0.9 + noise, -1, 1): [1.0 (clipped from 1.2), 0.6, 0.9, 0.6]
    # h = relu(sum(s') + a'):        [1.6, 2.1, 0 (relu of -2.1), 0.6]
    # Q1' = 2h + 1: [4.2, 5.2, 1.0, 2.2];  Q2' = 3 - h: [1.4, 0.9, 3.0, 2.4];  min: [1.4, 0.9, 1.0, 2.2]
    expected = torch.tensor([1.0 + 0.5 * 1.4, -1.0, 0.5 + 0.5 * 1.0, 2.0 + 0.5 * 2.2])
    torch.testing.assert_close(y, expected, rtol=0, atol=1e-6)


def _naive_q(state: dict, prefix: str, member: int, x: np.ndarray) -> np.ndarray:
    """One critic of a TwinCritic state dict, computed sample by sample in float64."""
    n_layers = len({k.split(".")[1] for k in state if k.startswith(f"{prefix}layers.")})
    out = []
    for row in x:
        h = row.astype(np.float64)
        for i in range(n_layers):
            w = state[f"{prefix}layers.{i}.weight"][member].double().numpy()  # [out, in]
            b = state[f"{prefix}layers.{i}.bias"][member, :, 0].double().numpy()
            h = w @ h + b
            if i < n_layers - 1:
                h = np.maximum(h, 0.0)
        out.append(h[0])
    return np.array(out)


def _naive_actor(module: torch.nn.Module, obs: np.ndarray) -> np.ndarray:
    linears = list(module.layers)
    h = obs.astype(np.float64)
    for i, layer in enumerate(linears):
        h = h @ layer.weight.detach().double().numpy().T + layer.bias.detach().double().numpy()
        h = np.maximum(h, 0.0) if i < len(linears) - 1 else np.tanh(h)
    return h


@pytest.mark.parametrize("learn_threads", [1, 2])
def test_forward_learn_matches_naive_recomputation(learn_threads):
    """The reported losses/values equal a float64 re-computation: smoothing noise drawn from the policy's
    generator and clipped, clipped double-Q, termination mask (truncated transitions bootstrap)."""
    policy = make_policy(target_noise=0.6, target_noise_clip=0.25, gamma=0.9, learn_threads=learn_threads)
    batch = make_batch(policy, n=16)
    batch["terminated"][:8] = 1.0
    batch["terminated"][8:] = 0.0  # e.g. time-limit truncations: not terminal
    critic = {k: v.clone() for k, v in policy.critic.state_dict().items()}
    critic_t = {k: v.clone() for k, v in policy.critic_target.state_dict().items()}
    rng = torch.Generator()
    rng.set_state(policy.torch_rng.get_state())
    raw = torch.randn(batch["action"].shape, generator=rng).double().numpy() * 0.6

    info = host_info(policy._forward_learn(batch))

    obs, act = batch["obs"].double().numpy(), batch["action"].double().numpy()
    next_obs, reward = batch["next_obs"].double().numpy(), batch["reward"].double().numpy()
    done = batch["terminated"].double().numpy()
    noise = np.clip(raw, -0.25, 0.25)
    assert np.abs(raw).max() > 0.25  # the clip is exercised
    next_act = np.clip(_naive_actor(policy.actor_target, next_obs) + noise, -1.0, 1.0)
    x_next = np.concatenate([next_obs, next_act], axis=1)
    q_next = np.minimum(_naive_q(critic_t, "", 0, x_next), _naive_q(critic_t, "", 1, x_next))
    y = reward + 0.9 * (1.0 - done) * q_next
    assert np.array_equal(y[:8], reward[:8])  # terminated: no bootstrap at all
    x = np.concatenate([obs, act], axis=1)
    q1, q2 = _naive_q(critic, "", 0, x), _naive_q(critic, "", 1, x)
    expected = dict(
        critic_loss=np.mean((q1 - y) ** 2),
        critic_twin_loss=np.mean((q2 - y) ** 2),
        q_value=q1.mean(),
        q_value_twin=q2.mean(),
        target_q_value=y.mean(),
        td_error=(np.abs(q1 - y).mean() + np.abs(q2 - y).mean()) / 2,
    )
    for key, value in expected.items():
        assert info[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_actor_loss_uses_the_updated_critic():
    """The actor step evaluates -mean Q1(s, pi(s)) with the critic *after* this iteration's update."""
    policy = make_policy(actor_update_freq=1)
    batch = make_batch(policy)
    actor_before = copy.deepcopy(policy.actor)
    info = host_info(policy._forward_learn(batch))
    with torch.no_grad():
        q = policy.critic(batch["obs"], actor_before(batch["obs"]))[0]
    assert info["actor_loss"] == pytest.approx(-q.mean().item(), rel=1e-6)


@pytest.mark.parametrize("learn_threads", [1, 2])
def test_gradients_of_one_iteration_match_autograd(learn_threads):
    """The critic gradients written by _forward_learn are autograd's for MSE(Q1, y) + MSE(Q2, y) on the
    pre-update critic; the actor gradients are autograd's for -mean Q1(s, pi(s)) with the *updated* critic."""
    policy = make_policy(actor_update_freq=1, learn_threads=learn_threads, gamma=0.9)
    batch = make_batch(policy, n=33, seed=4)
    actor, critic = copy.deepcopy(policy.actor), copy.deepcopy(policy.critic)
    rng = torch.Generator()
    rng.set_state(policy.torch_rng.get_state())
    raw = torch.randn(batch["action"].shape, generator=rng)
    noise = (raw * policy.target_noise).clamp(-policy.target_noise_clip, policy.target_noise_clip)
    y = policy.compute_target(batch["reward"], batch["next_obs"], batch["terminated"], noise)

    host_info(policy._forward_learn(batch))

    q = critic(batch["obs"], batch["action"])
    ((q - y) ** 2).mean(dim=1).sum().backward()
    for ours, ref in zip(policy.critic.parameters(), critic.parameters()):
        torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-5, atol=1e-6)

    updated = copy.deepcopy(policy.critic)  # the critic after this iteration's step
    loss = -updated(batch["obs"], actor(batch["obs"]))[0].mean()
    loss.backward()
    for ours, ref in zip(policy.actor.parameters(), actor.parameters()):
        torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------- delayed updates
def test_delayed_actor_and_polyak_target_updates():
    tau = 0.1
    policy = make_policy(actor_update_freq=3, tau=tau)
    batch = make_batch(policy)
    for it in range(1, 10):
        actor, critic = params(policy.actor), params(policy.critic)
        actor_t, critic_t = params(policy.actor_target), params(policy.critic_target)
        info = host_info(policy._forward_learn(batch))
        assert policy.update_count == it
        assert not same(critic, params(policy.critic))  # the critics learn every iteration
        if it % 3:
            assert "actor_loss" not in info
            assert same(actor, params(policy.actor))
            assert same(actor_t, params(policy.actor_target)) and same(critic_t, params(policy.critic_target))
        else:
            assert "actor_loss" in info
            assert not same(actor, params(policy.actor))
            for old_t, new_t, online in zip(
                actor_t + critic_t,
                params(policy.actor_target) + params(policy.critic_target),
                params(policy.actor) + params(policy.critic),
            ):
                torch.testing.assert_close(new_t, old_t + tau * (online - old_t), rtol=1e-6, atol=1e-7)


def test_targets_start_as_copies_and_have_no_gradients():
    policy = make_policy()
    assert same(params(policy.actor), params(policy.actor_target))
    assert same(params(policy.critic), params(policy.critic_target))
    assert not any(p.requires_grad for p in policy.actor_target.parameters())
    host_info(policy._forward_learn(make_batch(policy)))
    assert all(p.grad is None for p in policy.critic_target.parameters())


def test_learn_threads_give_the_same_updates():
    """One or two torch threads per iteration: the same updates (up to the products' rounding)."""
    one, two = make_policy(learn_threads=1, actor_update_freq=1), make_policy(learn_threads=2, actor_update_freq=1)
    for i in range(4):
        batch = make_batch(one, n=33, seed=i)
        info1, info2 = host_info(one._forward_learn(batch)), host_info(two._forward_learn(batch))
        assert info1.keys() == info2.keys()
        for key in info1:
            assert info1[key] == pytest.approx(info2[key], rel=1e-4, abs=1e-6), key
    for a, b in zip(params(one.actor) + params(one.critic), params(two.actor) + params(two.critic)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_iteration_runs_with_learn_threads_and_restores_the_callers_count(monkeypatch):
    policy = make_policy(learn_threads=2, adaptive_threads=False)
    seen = []
    original = policy._learn_step
    monkeypatch.setattr(policy, "_learn_step", lambda data: (seen.append(torch.get_num_threads()), original(data))[1])
    outer = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        host_info(policy._forward_learn(make_batch(policy)))
        assert seen == [2] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(outer)


def test_learn_threads_none_leaves_the_thread_count_alone():
    policy = make_policy()
    assert policy.cfg["learn_threads"] is None and policy.thread_chooser is None
    outer = torch.get_num_threads()
    host_info(policy._forward_learn(make_batch(policy)))
    assert torch.get_num_threads() == outer


def test_td3_probes_whole_actor_cycles():
    for freq, expected in ((1, 8), (2, 8), (3, 9), (20, 20)):
        chooser = make_policy(learn_threads=2, actor_update_freq=freq).thread_chooser
        assert chooser.probe_len == expected and chooser.probe_len % freq == 0
        assert chooser.probe_every >= 1000


def test_td3_steps_its_optimizers_directly():
    import gymnasium as gym

    from policies.td3 import TD3Policy

    env = gym.make("Pendulum-v1")
    policy = TD3Policy(dict(hidden_sizes=[32, 32], batch_size=16), env.observation_space, env.action_space, seed=0)
    gen = torch.Generator().manual_seed(0)
    batch = dict(obs=torch.randn(16, 3, generator=gen), action=torch.rand(16, 1, generator=gen) * 2 - 1,
                 reward=torch.randn(16, generator=gen), next_obs=torch.randn(16, 3, generator=gen),
                 terminated=torch.zeros(16))
    for _ in range(6):
        host_info(policy._forward_learn(batch))
    assert policy.adam_step(policy.critic_optimizer).direct_steps == 5 and policy.adam_step(policy.actor_optimizer).direct_steps == 2


def test_error_in_an_iteration_updates_nothing_and_restores_threads(monkeypatch):
    policy = make_policy(learn_threads=2, adaptive_threads=False)

    def failing(*args, **kwargs):
        raise RuntimeError("boom in the critic")

    monkeypatch.setattr(policy, "update_critic", failing)
    before = params(policy.critic) + params(policy.actor)
    outer = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="boom in the critic"):
        host_info(policy._forward_learn(make_batch(policy, n=16)))
    assert torch.get_num_threads() == outer
    assert same(before, params(policy.critic) + params(policy.actor)) and policy.update_count == 0
    assert policy.critic_optimizer.state_dict()["state"] == {}


# ------------------------------------------------------------------------------------------- devices
def test_plain_autograd_path_gives_the_same_iterations(monkeypatch):
    """With the feature-major kernels switched off (what happens on a GPU), TD3 computes the same updates
    through ordinary autograd operations."""
    import rlearn.nn.functional as nnf

    fused, plain = make_policy(actor_update_freq=1), make_policy(actor_update_freq=1)
    batches = [make_batch(fused, n=33, seed=i) for i in range(3)]
    infos_fused = [host_info(fused._forward_learn(b)) for b in batches]
    monkeypatch.setattr(nnf, "fused_kernels_enabled", lambda device: False)
    infos_plain = [host_info(plain._forward_learn(b)) for b in batches]
    for a, b in zip(infos_fused, infos_plain):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    for a, b in zip(params(fused.actor) + params(fused.critic), params(plain.actor) + params(plain.critic)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    obs = np.random.default_rng(0).uniform(-1, 1, size=(4, 3)).astype(np.float32)
    np.testing.assert_allclose(plain._forward_eval(obs), fused._forward_eval(obs), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_cuda():
    """On CUDA: networks, optimizer state and the noise generator on the GPU, no thread chooser, the same
    keys, and a state dict that loads into a CPU policy."""
    policy = TD3Policy({**SMALL, "learn_threads": 2, "actor_update_freq": 2}, OBS, ACT, seed=0, device="cuda")
    assert policy.thread_chooser is None
    assert all(p.is_cuda for p in policy.critic.parameters()) and policy.actor_optimizer.param_groups[0]["fused"]
    batch = make_batch(policy, n=32)  # CPU tensors: moved by the policy
    infos = [policy._forward_learn(batch) for _ in range(4)]
    assert "actor_loss" in infos[1] and all(math.isfinite(v) for info in infos for v in info.values())
    assert policy.adam_step(policy.critic_optimizer).direct_steps == 3 and policy.adam_step(policy.actor_optimizer).direct_steps == 1
    obs = np.zeros((3, 3), np.float32)
    assert policy._forward_collect(obs, 10**6)["action"].shape == (3, 1)
    cpu = make_policy()
    for name, module in policy.modules().items():
        assert list(module.state_dict()) == list(cpu.modules()[name].state_dict()), name
        assert all(v.is_cuda for v in module.state_dict().values()), name


# ---------------------------------------------------------------------------------- collect and eval
ASYM = spaces.Box(np.array([-1.0, 0.0, 2.0], np.float32), np.array([3.0, 0.5, 2.5], np.float32), dtype=np.float32)


def test_random_actions_before_learning_starts():
    policy = make_policy(act_space=ASYM, learning_starts=100)
    obs = np.zeros((4, 3), np.float32)
    env_actions, actions = [], []
    for envstep in range(0, 100, 4):
        out = policy._forward_collect(obs, envstep)
        assert out["action"].shape == (4, 3) and out["action"].dtype == np.float32
        assert out["env_action"].shape == (4, 3) and out["env_action"].dtype == np.float32
        actions.append(out["action"])
        env_actions.append(out["env_action"])
    actions, env_actions = np.concatenate(actions), np.concatenate(env_actions)
    assert np.all(actions >= -1) and np.all(actions <= 1)
    assert np.all(env_actions >= ASYM.low) and np.all(env_actions <= ASYM.high)
    # uniform over the whole box: each dimension reaches near both bounds and averages near the centre
    span = ASYM.high - ASYM.low
    assert np.all(env_actions.min(0) < ASYM.low + 0.1 * span) and np.all(env_actions.max(0) > ASYM.high - 0.1 * span)
    assert np.all(np.abs(env_actions.mean(0) - (ASYM.low + ASYM.high) / 2) < 0.15 * span)
    np.testing.assert_allclose(policy.to_env_action(actions), env_actions, rtol=1e-6)
    # the actor is not consulted: two policies with different weights but the same seed agree
    other = make_policy(act_space=ASYM, learning_starts=100, hidden_sizes=[8])
    other.np_random = np.random.default_rng(0)
    policy.np_random = np.random.default_rng(0)
    np.testing.assert_array_equal(policy._forward_collect(obs, 99)["action"], other._forward_collect(obs, 99)["action"])


def test_exploration_after_learning_starts():
    policy = make_policy(act_space=ASYM, learning_starts=100, exploration_noise=0.0)
    obs = np.random.default_rng(1).uniform(-1, 1, size=(5, 3)).astype(np.float32)
    out = policy._forward_collect(obs, 100)
    np.testing.assert_allclose(out["env_action"], policy._forward_eval(obs), rtol=1e-6)
    noisy = make_policy(act_space=ASYM, learning_starts=100, exploration_noise=0.3)
    actions = np.concatenate([noisy._forward_collect(obs, 100)["action"] for _ in range(200)])
    greedy = np.tile(noisy.to_normalized_action(noisy._forward_eval(obs)), (200, 1))
    assert np.all(np.abs(actions) <= 1)
    unclipped = np.abs(greedy) < 0.2  # far from the bounds the noise is a plain N(0, 0.3)
    assert np.std((actions - greedy)[unclipped]) == pytest.approx(0.3, rel=0.1)


def test_acting_follows_the_actor_module_for_every_input_layout():
    """Acting reads the actor through cached views: they must give the module's own forward for float32,
    float64 and non-contiguous observations, and follow the parameters through learning and loading."""
    policy = make_policy(act_space=ASYM, actor_update_freq=1)
    rng = np.random.default_rng(3)
    obs64 = rng.uniform(-1, 1, size=(6, 3))

    def module_actions(obs):
        with torch.no_grad():
            return policy.actor(torch.as_tensor(np.asarray(obs, np.float32))).numpy()

    for obs in (obs64.astype(np.float32), obs64, np.asfortranarray(obs64.astype(np.float32)), obs64[::2].astype(np.float32)):
        np.testing.assert_allclose(policy._actor_numpy(obs), module_actions(obs), rtol=1e-5, atol=1e-6)
    before = policy._actor_numpy(obs64.astype(np.float32))
    host_info(policy._forward_learn(make_batch(policy)))  # an actor step changes the parameters in place
    after = policy._actor_numpy(obs64.astype(np.float32))
    assert not np.array_equal(before, after)
    np.testing.assert_allclose(after, module_actions(obs64), rtol=1e-5, atol=1e-6)
    fresh = make_policy(act_space=ASYM, seed=99)
    fresh._actor_numpy(obs64)  # views cached before the load
    fresh.load_state_dict(policy.state_dict())
    np.testing.assert_array_equal(fresh._actor_numpy(obs64), policy._actor_numpy(obs64))


def test_action_scaling_asymmetric_bounds():
    policy = make_policy(act_space=ASYM)
    norm = np.array([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.5, -0.5, 0.0]])
    env = policy.to_env_action(norm)
    np.testing.assert_allclose(env[0], ASYM.low)
    np.testing.assert_allclose(env[1], ASYM.high)
    np.testing.assert_allclose(env[2], [1.0, 0.25, 2.25])
    np.testing.assert_allclose(env[3], [2.0, 0.125, 2.25])
    np.testing.assert_allclose(policy.to_normalized_action(env), norm, atol=1e-6)
    obs = np.random.default_rng(0).uniform(-1, 1, size=(64, 3)).astype(np.float32)
    act = policy._forward_eval(obs)
    assert act.dtype == np.float32 and np.all(act >= ASYM.low) and np.all(act <= ASYM.high)


@settings(max_examples=30, deadline=None)
@given(
    bounds=st.lists(
        st.tuples(st.floats(-100, 100), st.floats(1e-3, 50)), min_size=1, max_size=4
    ),
    data=st.data(),
)
def test_action_scaling_matches_naive_affine_map(bounds, data):
    low = np.array([b[0] for b in bounds], np.float32)
    high = np.array([b[0] + b[1] for b in bounds], np.float32)
    space = spaces.Box(low, high, dtype=np.float32)
    policy = TD3Policy(dict(SMALL, hidden_sizes=[2]), OBS, space, seed=0)
    norm = np.array(data.draw(st.lists(st.floats(-1, 1), min_size=len(bounds), max_size=len(bounds))))[None]
    env = policy.to_env_action(norm)
    lo, hi = space.low.astype(np.float64), space.high.astype(np.float64)
    naive = lo + (norm + 1.0) / 2.0 * (hi - lo)
    np.testing.assert_allclose(env, naive, rtol=1e-5, atol=1e-5 * (1 + np.abs(hi).max()))
    assert np.all(env >= space.low) and np.all(env <= space.high)
    # env actions are float32: the round trip is exact up to float32 rounding relative to the range
    eps = 4 * np.finfo(np.float32).eps * (1 + np.abs(np.concatenate([lo, hi])).max()) / ((hi - lo) / 2).min()
    np.testing.assert_allclose(policy.to_normalized_action(env), norm, atol=max(eps, 1e-6))


def test_multidimensional_box_action_and_observation():
    obs_space = spaces.Box(-1.0, 1.0, shape=(2, 3), dtype=np.float32)
    act_space = spaces.Box(low=-np.ones((2, 2), np.float32), high=np.full((2, 2), 4.0, np.float32))
    policy = make_policy(obs_space, act_space)
    obs = np.zeros((5, 2, 3), np.float32)
    out = policy._forward_collect(obs, 0)
    assert out["action"].shape == (5, 2, 2) and out["env_action"].shape == (5, 2, 2)
    assert policy._forward_eval(obs).shape == (5, 2, 2)
    info = host_info(policy._forward_learn(make_batch(policy)))
    assert math.isfinite(info["critic_loss"])


# ---------------------------------------------------------------------------------------------- state
def test_state_dict_round_trip_gives_identical_outputs():
    policy = make_policy(actor_update_freq=2)
    batch = make_batch(policy)
    for _ in range(3):  # odd: the next iteration is an actor step only if update_count was restored
        host_info(policy._forward_learn(batch))
    buffer = io.BytesIO()
    torch.save(policy.state_dict(), buffer)
    buffer.seek(0)
    restored = make_policy(seed=123)
    restored.load_state_dict(torch.load(buffer, weights_only=False))
    assert restored.update_count == 3
    obs = np.random.default_rng(5).uniform(-1, 1, size=(7, 3)).astype(np.float32)
    np.testing.assert_array_equal(policy._forward_eval(obs), restored._forward_eval(obs))
    np.testing.assert_array_equal(policy._forward_collect(obs, 10**6)["action"], restored._forward_collect(obs, 10**6)["action"])
    info_a, info_b = host_info(policy._forward_learn(batch)), host_info(restored._forward_learn(batch))
    assert info_a == info_b and "actor_loss" in info_a
    for name in ("actor", "critic", "actor_target", "critic_target"):
        assert same(params(policy.modules()[name]), params(restored.modules()[name])), name


def test_modules_and_optimizers_names():
    policy = make_policy()
    assert set(policy.modules()) == {"actor", "critic", "actor_target", "critic_target"}
    assert set(policy.optimizers()) == {"actor", "critic"}
    with pytest.raises(ValueError, match="update_count"):
        policy.load_extra_state({"update_count": -1})


def test_same_seed_same_networks():
    a, b, c = make_policy(seed=7), make_policy(seed=7), make_policy(seed=8)
    assert same(params(a.actor) + params(a.critic), params(b.actor) + params(b.critic))
    assert not same(params(a.actor), params(c.actor))


# -------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "override, match",
    [
        (dict(taus=0.1), "policy.taus"),
        (dict(tau=0.0), "policy.tau"),
        (dict(gamma=1.5), "policy.gamma"),
        (dict(hidden_sizes=[]), "policy.hidden_sizes"),
        (dict(hidden_sizes=[64, 0]), r"policy.hidden_sizes\[1\]"),
        (dict(actor_update_freq=0), "policy.actor_update_freq"),
        (dict(batch_size=2.5), "policy.batch_size"),
        (dict(target_noise=float("nan")), "policy.target_noise"),
        (dict(learn_threads=0), "policy.learn_threads"),
        (dict(adaptive_threads="yes"), "policy.adaptive_threads"),
        (dict(precision="fp16"), "policy.precision"),
        (dict(precision=None), "policy.precision"),
    ],
)
def test_bad_config_names_the_key(override, match):
    with pytest.raises(PolicyConfigError, match=match):
        make_policy(**override)


def test_bad_spaces():
    with pytest.raises(TypeError, match="Box"):
        make_policy(act_space=spaces.Discrete(3))
    with pytest.raises(ValueError, match="finite action bounds"):
        make_policy(act_space=spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32))


@pytest.mark.parametrize(
    "mutate, error, match",
    [
        (lambda b: b.pop("terminated"), KeyError, "terminated"),
        (lambda b: b.__setitem__("reward", b["reward"][:3]), ValueError, "'reward'"),
        (lambda b: b.__setitem__("obs", b["obs"][:, :2]), ValueError, "'obs'"),
        (lambda b: b.__setitem__("action", b["action"].numpy()), TypeError, "'action'"),
        (lambda b: b["next_obs"].__setitem__((2, 1), float("nan")), ValueError, "next_obs"),
        (lambda b: b["reward"].__setitem__(0, float("inf")), ValueError, "reward"),
    ],
)
def test_bad_batch_is_refused_before_any_update(mutate, error, match):
    policy = make_policy(actor_update_freq=1)
    batch = make_batch(policy)
    mutate(batch)
    before = params(policy.actor) + params(policy.critic) + params(policy.critic_target)
    with pytest.raises(error, match=match):
        host_info(policy._forward_learn(batch))
    assert same(before, params(policy.actor) + params(policy.critic) + params(policy.critic_target))
    assert policy.update_count == 0


def test_huge_finite_batch_is_not_mistaken_for_a_non_finite_one():
    """The quick check sums each tensor; a sum that overflows on finite values must not refuse the batch."""
    policy = make_policy()
    batch = make_batch(policy)
    batch["reward"][:] = 3e38  # finite, but 256 of them sum to inf in float32
    assert not torch.isfinite(batch["reward"].sum())
    obs, action, reward, next_obs, terminated = policy._check_batch(batch)
    assert torch.equal(reward, batch["reward"])
    batch["reward"][5] = -float("inf")
    with pytest.raises(ValueError, match=r"non-finite values \(NaN/inf\) in batch \['reward'\]"):
        policy._check_batch(batch)


def test_registry_resolves_td3():
    assert get_policy_class("td3") is TD3Policy
    assert TD3Policy.on_policy is False


# ------------------------------------------------------------------------------- config and run
def test_bundled_config_has_every_key():
    from rlearn.config import REQUIRED_KEYS, get_by_path, load_config

    raw = load_config("td3_pendulum")  # the bundled file states only what differs; resolved, it has every key
    for key in (*REQUIRED_KEYS, "device", "env.asynchronous", "buffer.size", "train.collect_steps",
                "train.updates_per_step", "learner.monitor_windows", "learner.strict", "learner.hooks",
                "eval.num_envs", "eval.stop_value", "checkpoint.keep", "policy.type"):
        get_by_path(raw, key)  # KeyError names a missing key
    assert set(TD3Policy.default_config) <= set(raw["policy"])
    cfg = load_config("td3_pendulum")
    assert cfg["policy"]["type"] == "td3" and cfg["buffer"]["size"] == 200_000
    assert cfg["policy"]["hidden_sizes"] == [400, 300] and cfg["policy"]["gamma"] == 0.98


def test_rlearn_train_cli_shows_the_delayed_actor_loss(tmp_path):
    """A tiny real run through `rlearn train`: the table and TensorBoard carry actor_loss (declared
    correctly, averaged over the actor steps in the window), and a checkpoint is written."""
    import subprocess
    import sys

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    work = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlearn", "train", "td3_pendulum", "--work-dir", str(work), "--no-progress",
           "--set", "train.max_env_steps=300", "policy.learning_starts=100", "policy.batch_size=32",
           "policy.hidden_sizes=[32,32]", "learner.log_freq=50", "eval.freq=none", "eval.episodes=1",
           "checkpoint.freq=none", "buffer.size=1000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = (work / "td3_pendulum.log").read_text()
    assert "actor_loss_avg" in log and "critic_twin_loss_avg" in log and "td_error_avg" in log
    acc = EventAccumulator(str(work / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for key in make_policy().monitor_vars():
        assert f"learner_iter/{key}_avg" in tags, key
    actor = acc.Scalars("learner_iter/actor_loss_avg")
    # 200 iterations (the 200 steps past 100 learning starts): a table every 50; the run ends on the last one
    assert [e.step for e in actor] == [50, 100, 150, 200]
    assert [e.step for e in acc.Scalars("learner_iter/critic_loss_avg")] == [50, 100, 150, 200]
    assert all(math.isfinite(e.value) for e in actor)
    assert (work / "ckpt" / "latest.pt").is_file()


@pytest.mark.slow
def test_learns_pendulum_through_a_run(tmp_path):
    """One seed, 7000 env steps (1000 random, then 6000 gradient steps): far better than random (~ -1200)."""
    from rlearn.config import load_config
    from rlearn.run import train

    cfg = load_config("td3_pendulum", overrides=["train.max_env_steps=7000", "policy.learning_starts=1000",
                                                 "eval.freq=none", "checkpoint.freq=none", "seed=0"])
    result = train(cfg, work_dir=tmp_path / "run", progress=False)
    assert result.envstep == 7000 and result.train_iter == 6000  # learning starts after the 1000th step
    assert result.last_eval["episode_return_mean"] > -700, result.last_eval


# ------------------------------------------------------------------------------------- bf16 opt-in
def test_bf16_precision_trains_close_to_fp32_with_fp32_parameters():
    check_bf16_precision(make_policy, make_batch)

