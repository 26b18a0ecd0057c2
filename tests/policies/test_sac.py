"""SACPolicy: monitored keys (sparse actor keys), the exact losses, delayed actor, entropy tuning, state."""

from __future__ import annotations

import copy
import io
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from gymnasium import spaces

from policies import PolicyConfigError, get_policy_class
from policies.sac import SACPolicy
from tests.policies.precision_checks import check_bf16_precision
from tests.policies.reports import host_info, is_reported_number

OBS = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
ACT = spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)
SMALL = dict(hidden_sizes=[16, 16], batch_size=8, learning_starts=0, lr_actor=1e-2, lr_critic=1e-2, lr_alpha=1e-2)
LOG_2PI = math.log(2 * math.pi)
CRITIC_KEYS = ["critic_loss", "critic_twin_loss", "q_value", "q_value_twin", "target_q_value", "td_error", "cur_lr_critic"]
SPARSE_KEYS = ["actor_loss", "entropy", "alpha", "alpha_loss", "cur_lr_actor"]


def make_policy(obs_space=OBS, act_space=ACT, seed=0, **cfg) -> SACPolicy:
    return SACPolicy({**SMALL, **cfg}, obs_space, act_space, seed=seed)


def make_batch(policy: SACPolicy, n: int = 8, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)

    def t(shape, low=-1.0, high=1.0):
        return torch.as_tensor(rng.uniform(low, high, size=shape), dtype=torch.float32)

    return dict(obs=t((n, *policy.obs_shape)), action=t((n, *policy.act_shape)), reward=t((n,), -2.0, 0.0),
                next_obs=t((n, *policy.obs_shape)),
                terminated=torch.as_tensor(rng.integers(0, 2, size=n), dtype=torch.float32))


def params(module: torch.nn.Module) -> list:
    return [p.detach().clone() for p in module.parameters()]


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


# ------------------------------------------------------------------------------------ naive float64 maths
def naive_q(state: dict, member: int, x: np.ndarray) -> np.ndarray:
    """One critic of a TwinCritic state dict, sample by sample in float64."""
    n_layers = len({k.split(".")[1] for k in state})
    out = []
    for row in x:
        h = row.astype(np.float64)
        for i in range(n_layers):
            h = state[f"layers.{i}.weight"][member].double().numpy() @ h + state[f"layers.{i}.bias"][member, :, 0].double().numpy()
            if i < n_layers - 1:
                h = np.maximum(h, 0.0)
        out.append(h[0])
    return np.array(out)


def naive_sample(actor_state: dict, obs: np.ndarray, eps: np.ndarray, act_dim: int, lo=-20.0, hi=2.0):
    """(action, log pi) of the squashed Gaussian from an actor state dict, in float64, textbook formulas."""
    n_layers = len({k.split(".")[1] for k in actor_state})
    keys = sorted({int(k.split(".")[1]) for k in actor_state})
    h = obs.astype(np.float64)
    for j, i in enumerate(keys):
        h = h @ actor_state[f"layers.{i}.weight"].double().numpy().T + actor_state[f"layers.{i}.bias"].double().numpy()
        if j < n_layers - 1:
            h = np.maximum(h, 0.0)
    mean, log_std = h[:, :act_dim], np.clip(h[:, act_dim:], lo, hi)
    std = np.exp(log_std)
    u = mean + std * eps
    log_normal = -((u - mean) ** 2) / (2 * std**2) - log_std - 0.5 * LOG_2PI
    log_prob = (log_normal - np.log(1.0 - np.tanh(u) ** 2)).sum(1)
    return np.tanh(u), log_prob


def draws(policy: SACPolicy, n: int, count: int) -> list:
    """The next ``count`` standard normal draws [n, act_dim] the policy's generator will make."""
    rng = torch.Generator()
    rng.set_state(policy.torch_rng.get_state())
    return [torch.randn(n, policy.act_dim, generator=rng).double().numpy() for _ in range(count)]


# --------------------------------------------------------------------------------------- monitoring
@pytest.mark.parametrize("freq", [1, 2, 3])
@pytest.mark.parametrize("autotune", [True, False])
def test_monitor_vars_both_directions(freq, autotune):
    """Every returned key is declared; every declared key appears within policy_frequency iterations; the
    sparse keys exactly on actor iterations, the critic keys on every one."""
    policy = make_policy(policy_frequency=freq, autotune=autotune)
    declared = policy.monitor_vars()
    sparse = [k for k in SPARSE_KEYS if autotune or k != "alpha_loss"]
    assert declared == CRITIC_KEYS + sparse
    batch = make_batch(policy)
    infos = [policy._forward_learn(batch) for _ in range(3 * freq)]
    for i, info in enumerate(infos, start=1):
        assert set(info) <= set(declared), set(info) - set(declared)
        assert all(is_reported_number(v) and math.isfinite(float(v)) for v in info.values()), info
        assert set(CRITIC_KEYS) <= set(info)
        actor_step = i % freq == 0
        assert set(info) - set(CRITIC_KEYS) == (set(sparse) if actor_step else set()), (i, sorted(info))
    for start in range(len(infos) - freq + 1):
        window = set().union(*infos[start:start + freq])
        assert window == set(declared), (start, set(declared) - window)


def test_reported_learning_rates_follow_the_optimizers():
    policy = make_policy(policy_frequency=1, lr_actor=1e-3, lr_critic=2e-3)
    batch = make_batch(policy)
    info = host_info(policy._forward_learn(batch))
    assert (info["cur_lr_actor"], info["cur_lr_critic"]) == (1e-3, 2e-3)
    policy.optimizers()["critic"].param_groups[0]["lr"] = 5e-4
    assert host_info(policy._forward_learn(batch))["cur_lr_critic"] == 5e-4


# ------------------------------------------------------------------------------------- exact numbers
@pytest.mark.parametrize("learn_threads", [None, 2])
def test_one_iteration_matches_a_naive_recomputation(learn_threads):
    """policy_frequency 1, so one iteration is: soft target (entropy term, clipped double-Q, termination
    mask), both critic MSEs, then the actor loss with the *updated* critics and the alpha loss, all on the
    generator's draws, recomputed in float64 with textbook formulas."""
    gamma, log_alpha0 = 0.9, math.log(0.7)
    policy = make_policy(policy_frequency=1, gamma=gamma, init_alpha=0.7, learn_threads=learn_threads)
    batch = make_batch(policy, n=16)
    batch["terminated"][:8], batch["terminated"][8:] = 1.0, 0.0
    actor0 = {k: v.clone() for k, v in policy.actor.state_dict().items()}
    critic0 = {k: v.clone() for k, v in policy.critic.state_dict().items()}
    target0 = {k: v.clone() for k, v in policy.critic_target.state_dict().items()}
    eps_next, eps_pi = draws(policy, 16, 2)

    info = host_info(policy._forward_learn(batch))

    obs, act = batch["obs"].double().numpy(), batch["action"].double().numpy()
    next_obs, reward, done = (batch[k].double().numpy() for k in ("next_obs", "reward", "terminated"))
    alpha = 0.7
    next_act, next_logp = naive_sample(actor0, next_obs, eps_next, 2)
    x_next = np.concatenate([next_obs, next_act], 1)
    soft_next = np.minimum(naive_q(target0, 0, x_next), naive_q(target0, 1, x_next)) - alpha * next_logp
    y = reward + gamma * (1.0 - done) * soft_next
    assert np.array_equal(y[:8], reward[:8])  # terminated: no bootstrap
    x = np.concatenate([obs, act], 1)
    q1, q2 = naive_q(critic0, 0, x), naive_q(critic0, 1, x)
    critic1 = {k: v.clone() for k, v in policy.critic.state_dict().items()}  # after its step, before the actor's
    pi_act, logp = naive_sample(actor0, obs, eps_pi, 2)
    x_pi = np.concatenate([obs, pi_act], 1)
    min_q_pi = np.minimum(naive_q(critic1, 0, x_pi), naive_q(critic1, 1, x_pi))
    expected = dict(
        critic_loss=np.mean((q1 - y) ** 2), critic_twin_loss=np.mean((q2 - y) ** 2),
        q_value=q1.mean(), q_value_twin=q2.mean(), target_q_value=y.mean(),
        td_error=(np.abs(q1 - y).mean() + np.abs(q2 - y).mean()) / 2,
        actor_loss=np.mean(alpha * logp - min_q_pi),
        entropy=-logp.mean(),
        alpha_loss=-log_alpha0 * (logp.mean() + policy.target_entropy),
    )
    for key, value in expected.items():
        assert info[key] == pytest.approx(value, rel=2e-5, abs=2e-6), key
    assert policy.target_entropy == -2.0
    # one Adam step of size lr on log_alpha: its gradient is -(mean log pi + target_entropy)
    direction = np.sign(logp.mean() + policy.target_entropy)
    assert info["alpha"] == pytest.approx(math.exp(log_alpha0 + 1e-2 * direction), rel=1e-5)
    assert policy.alpha.item() == pytest.approx(info["alpha"], rel=1e-6)


def test_gradients_match_autograd_on_plain_modules():
    """The critic gradients are autograd's for MSE(Q1, y) + MSE(Q2, y); the actor's for
    mean(alpha log pi - min Q(s, a~)) with the updated critics, computed on deep copies."""
    policy = make_policy(policy_frequency=1, gamma=0.9, autotune=False, init_alpha=0.3)
    batch = make_batch(policy, n=33, seed=4)
    actor, critic = copy.deepcopy(policy.actor), copy.deepcopy(policy.critic)
    rng = torch.Generator()
    rng.set_state(policy.torch_rng.get_state())
    eps_next, eps_pi = (torch.randn(33, 2, generator=rng) for _ in range(2))
    y = policy.compute_target(batch["reward"], batch["next_obs"], batch["terminated"], eps_next)

    host_info(policy._forward_learn(batch))

    q = critic(batch["obs"], batch["action"])
    ((q - y) ** 2).mean(dim=1).sum().backward()
    for ours, ref in zip(policy.critic.parameters(), critic.parameters()):
        torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-5, atol=1e-6)
    updated = copy.deepcopy(policy.critic).requires_grad_(False)
    mean, log_std = actor(batch["obs"])
    dist = torch.distributions.Normal(mean, log_std.exp())
    u = mean + log_std.exp() * eps_pi
    log_prob = (dist.log_prob(u) - torch.log(1 - torch.tanh(u) ** 2)).sum(-1)
    (0.3 * log_prob - updated(batch["obs"], torch.tanh(u)).amin(0)).mean().backward()
    for ours, ref in zip(policy.actor.parameters(), actor.parameters()):
        torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-4, atol=1e-5)
    assert all(p.grad is None for p in policy.critic_target.parameters())


def test_fixed_alpha_has_no_optimizer_and_does_not_move():
    policy = make_policy(autotune=False, init_alpha=0.25, policy_frequency=1)
    assert set(policy.optimizers()) == {"actor", "critic"} and not policy.log_alpha.requires_grad
    info = host_info(policy._forward_learn(make_batch(policy)))
    assert info["alpha"] == pytest.approx(0.25) and "alpha_loss" not in info


def test_temperature_follows_the_entropy_target():
    """alpha falls while the entropy is above target_entropy and rises while it is below."""
    for target, falls in ((-50.0, True), (50.0, False)):
        policy = make_policy(policy_frequency=1, target_entropy=target)
        batch = make_batch(policy)
        alphas = [host_info(policy._forward_learn(batch))["alpha"] for _ in range(5)]
        assert all((b < a) if falls else (b > a) for a, b in zip([1.0] + alphas, alphas)), (target, alphas)


# ----------------------------------------------------------------------------------- delayed updates
def test_delayed_actor_polyak_every_iteration():
    """policy_frequency 3: the actor (and alpha) move on every 3rd iteration only, three updates at once;
    the critics and, by Polyak averaging, their targets move every iteration."""
    tau = 0.1
    policy = make_policy(policy_frequency=3, tau=tau)
    batch = make_batch(policy)
    for it in range(1, 8):
        actor, critic_t, alpha = params(policy.actor), params(policy.critic_target), policy.alpha.item()
        steps_before = float(policy.actor_optimizer.state_dict()["state"].get(0, {}).get("step", 0.0))
        info = host_info(policy._forward_learn(batch))
        assert policy.update_count == it
        for old_t, new_t, online in zip(critic_t, params(policy.critic_target), params(policy.critic)):
            torch.testing.assert_close(new_t, old_t + tau * (online - old_t), rtol=1e-6, atol=1e-7)
        steps_after = float(policy.actor_optimizer.state_dict()["state"].get(0, {}).get("step", 0.0))
        if it % 3:
            assert "actor_loss" not in info and same(actor, params(policy.actor)) and policy.alpha.item() == alpha
            assert steps_after == steps_before
        else:
            assert "actor_loss" in info and not same(actor, params(policy.actor)) and policy.alpha.item() != alpha
            assert steps_after == steps_before + 3  # three actor updates now: one per iteration


def test_critic_target_starts_as_a_copy_without_gradients():
    policy = make_policy()
    assert same(params(policy.critic), params(policy.critic_target))
    assert not any(p.requires_grad for p in policy.critic_target.parameters())


def test_plain_autograd_path_gives_the_same_iterations(monkeypatch):
    """With the feature-major kernels off (as on a GPU), the same updates through plain autograd ops."""
    import rlearn.nn.functional as nnf

    fused, plain = make_policy(policy_frequency=1), make_policy(policy_frequency=1)
    batches = [make_batch(fused, n=33, seed=i) for i in range(3)]
    infos_fused = [host_info(fused._forward_learn(b)) for b in batches]
    monkeypatch.setattr(nnf, "fused_kernels_enabled", lambda device: False)
    infos_plain = [host_info(plain._forward_learn(b)) for b in batches]
    for a, b in zip(infos_fused, infos_plain):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-5), key
    obs = np.random.default_rng(0).uniform(-1, 1, size=(4, 3)).astype(np.float32)
    np.testing.assert_allclose(plain._forward_eval(obs), fused._forward_eval(obs), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_cuda():
    policy = SACPolicy({**SMALL, "learn_threads": 2, "policy_frequency": 2}, OBS, ACT, seed=0, device="cuda")
    assert policy.thread_chooser is None and policy.log_alpha.is_cuda
    infos = [policy._forward_learn(make_batch(policy, n=32)) for _ in range(4)]
    assert "alpha_loss" in infos[1] and all(math.isfinite(v) for info in infos for v in info.values())
    obs = np.zeros((3, 3), np.float32)
    assert policy._forward_collect(obs, 10**6)["action"].shape == (3, 2)
    cpu = make_policy()
    cpu.load_state_dict(policy.state_dict())


# ---------------------------------------------------------------------------------- collect and eval
def test_random_actions_before_learning_starts_then_samples():
    policy = make_policy(learning_starts=50)
    obs = np.zeros((4, 3), np.float32)
    early = np.concatenate([policy._forward_collect(obs, step)["action"] for step in range(0, 48, 4)])
    assert early.dtype == np.float32 and np.all(np.abs(early) <= 1) and early.std() > 0.4  # uniform: std 0.58
    out = policy._forward_collect(obs, 50)
    assert out["action"].shape == (4, 2) and out["env_action"].shape == (4, 2)
    np.testing.assert_allclose(out["env_action"], 2.0 * out["action"], rtol=1e-6)  # [-2, 2] torque units


def test_samples_follow_the_actor_distribution_and_eval_is_tanh_mean():
    policy = make_policy(learning_starts=0)
    obs = np.random.default_rng(1).uniform(-1, 1, size=(1, 3)).astype(np.float32)
    with torch.no_grad():
        mean, log_std = (t.double().numpy()[0] for t in policy.actor(torch.as_tensor(obs)))
    samples = np.concatenate([policy._forward_collect(obs, 10)["action"] for _ in range(4000)]).astype(np.float64)
    u = np.arctanh(np.clip(samples, -1 + 1e-6, 1 - 1e-6))
    np.testing.assert_allclose(u.mean(0), mean, atol=4 * np.exp(log_std).max() / np.sqrt(4000) + 1e-3)
    np.testing.assert_allclose(u.std(0), np.exp(log_std), rtol=0.1)
    np.testing.assert_allclose(policy._forward_eval(obs)[0], 2.0 * np.tanh(mean), rtol=1e-5)


# ---------------------------------------------------------------------------------------------- state
def test_state_dict_round_trip_continues_identically():
    """Networks, optimizers (actor, critic, alpha), log_alpha, the update counter and both generators."""
    policy = make_policy(policy_frequency=2)
    batch = make_batch(policy)
    for _ in range(3):  # odd: the next iteration is an actor step only if update_count was restored
        host_info(policy._forward_learn(batch))
    buffer = io.BytesIO()
    torch.save(policy.state_dict(), buffer)
    buffer.seek(0)
    restored = make_policy(seed=123)
    restored.load_state_dict(torch.load(buffer, weights_only=False))
    assert restored.update_count == 3 and restored.alpha.item() == policy.alpha.item()
    assert set(restored.optimizers()) == {"actor", "critic", "alpha"}
    torch.testing.assert_close(restored.alpha_optimizer.state_dict()["state"], policy.alpha_optimizer.state_dict()["state"])
    assert restored.alpha_optimizer.param_groups[0]["params"][0] is restored.log_alpha
    obs = np.random.default_rng(5).uniform(-1, 1, size=(7, 3)).astype(np.float32)
    np.testing.assert_array_equal(policy._forward_eval(obs), restored._forward_eval(obs))
    np.testing.assert_array_equal(policy._forward_collect(obs, 10**6)["action"], restored._forward_collect(obs, 10**6)["action"])
    for _ in range(3):
        info_a, info_b = host_info(policy._forward_learn(batch)), host_info(restored._forward_learn(batch))
        assert info_a == info_b
    assert "alpha_loss" in info_a
    for name in ("actor", "critic", "critic_target"):
        assert same(params(policy.modules()[name]), params(restored.modules()[name])), name


def test_bad_checkpoint_extra_state():
    policy = make_policy()
    with pytest.raises(ValueError, match="update_count"):
        policy.load_extra_state({"update_count": -1})
    with pytest.raises(ValueError, match="log_alpha"):
        policy.load_extra_state({"log_alpha": torch.tensor(float("nan"))})


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
        (dict(policy_frequency=0), "policy.policy_frequency"),
        (dict(init_alpha=0.0), "policy.init_alpha"),
        (dict(autotune="yes"), "policy.autotune"),
        (dict(target_entropy=float("nan")), "policy.target_entropy"),
        (dict(log_std_min=2.0, log_std_max=-2.0), "policy.log_std_max"),
        (dict(lr_alpha=-1.0), "policy.lr_alpha"),
        (dict(learn_threads=0), "policy.learn_threads"),
        (dict(precision="fp16"), "policy.precision"),
        (dict(precision=None), "policy.precision"),
    ],
)
def test_bad_config_names_the_key(override, match):
    with pytest.raises(PolicyConfigError, match=match):
        make_policy(**override)


def test_bad_spaces_and_batches():
    with pytest.raises(TypeError, match="Box"):
        make_policy(act_space=spaces.Discrete(3))
    with pytest.raises(ValueError, match="finite action bounds"):
        make_policy(act_space=spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32))
    policy = make_policy(policy_frequency=1)
    before = params(policy.actor) + params(policy.critic)
    for mutate, error, match in (
        (lambda b: b.pop("terminated"), KeyError, "terminated"),
        (lambda b: b.__setitem__("obs", b["obs"][:, :2]), ValueError, "'obs'"),
        (lambda b: b["reward"].__setitem__(0, float("nan")), ValueError, "reward"),
    ):
        batch = make_batch(policy)
        mutate(batch)
        with pytest.raises(error, match=match):
            host_info(policy._forward_learn(batch))
    assert same(before, params(policy.actor) + params(policy.critic)) and policy.update_count == 0
    assert policy.alpha.item() == 1.0


def test_registry_resolves_sac():
    assert get_policy_class("sac") is SACPolicy and SACPolicy.on_policy is False


# ------------------------------------------------------------------------------- config and run
def test_bundled_config_has_rl_zoo_settings():
    from rlearn.config import REQUIRED_KEYS, get_by_path, load_config

    raw = load_config("sac_pendulum")  # the bundled file states only what differs; resolved, it has every key
    for key in (*REQUIRED_KEYS, "device", "buffer.size", "train.updates_per_step", "eval.stop_value", "policy.type"):
        get_by_path(raw, key)
    assert set(SACPolicy.default_config) <= set(raw["policy"])
    cfg = load_config("sac_pendulum")
    policy, train = cfg["policy"], cfg["train"]
    assert policy["type"] == "sac" and cfg["env"]["id"] == "Pendulum-v1"
    assert (policy["lr_actor"], policy["lr_critic"], policy["lr_alpha"]) == (1e-3, 1e-3, 1e-3)
    assert (policy["learning_starts"], policy["batch_size"], policy["tau"], policy["gamma"]) == (100, 256, 0.005, 0.99)
    assert policy["hidden_sizes"] == [256, 256] and policy["autotune"] and policy["target_entropy"] is None
    assert cfg["buffer"]["size"] == 1_000_000 and train["max_env_steps"] == 20_000 and train["updates_per_step"] == 1.0


def test_list_configs_shows_sac_pendulum():
    out = subprocess.run([sys.executable, "-m", "rlearn", "train", "--list-configs"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert any(line.startswith("sac_pendulum") and "SAC on Pendulum-v1" in line for line in out.stdout.splitlines())


def test_rlearn_train_cli_shows_the_sparse_keys_and_resumes(tmp_path):
    """A tiny real run through `rlearn train`: TensorBoard carries every declared key, the sparse ones
    averaged over the actor iterations of each window; then a resumed run continues the counters."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    work = tmp_path / "run"
    base = [sys.executable, "-m", "rlearn", "train", "sac_pendulum", "--work-dir", str(work), "--no-progress", "--set",
            "policy.learning_starts=100", "policy.batch_size=32", "policy.hidden_sizes=[32,32]", "learner.log_freq=50",
            "eval.freq=none", "eval.episodes=1", "checkpoint.freq=none", "buffer.size=1000"]
    proc = subprocess.run(base + ["train.max_env_steps=300"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = (work / "sac_pendulum.log").read_text()
    assert "alpha_loss_avg" in log and "entropy_avg" in log and "critic_twin_loss_avg" in log
    acc = EventAccumulator(str(work / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for key in make_policy().monitor_vars():
        assert f"learner_iter/{key}_avg" in tags, key
    assert [e.step for e in acc.Scalars("learner_iter/alpha_avg")] == [50, 100, 150, 200]  # 200 steps past 100
    resumed = subprocess.run(base + ["train.max_env_steps=400", "--resume"], capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    acc = EventAccumulator(str(work / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    steps = [e.step for e in acc.Scalars("learner_iter/alpha_avg")]
    assert steps[-1] == 300 and len(steps) == len(set(steps)), steps


@pytest.mark.slow
@pytest.mark.timeout(3600)  # ~8 min at 40 env steps/s, much longer on a loaded shared machine
def test_learns_pendulum_at_20k_steps(tmp_path):
    """The bundled config, seed 0, 20,000 env steps: solved (evaluation return >= -200)."""
    from rlearn.config import load_config
    from rlearn.run import train

    cfg = load_config("sac_pendulum", overrides=["eval.freq=none", "checkpoint.freq=none", "seed=0"])
    result = train(cfg, work_dir=tmp_path / "run", progress=False)
    assert result.envstep == 20_000
    assert result.last_eval["episode_return_mean"] >= -200, result.last_eval


# ------------------------------------------------------------------------------------- bf16 opt-in
def test_bf16_precision_trains_close_to_fp32_with_fp32_parameters():
    check_bf16_precision(make_policy, make_batch)

