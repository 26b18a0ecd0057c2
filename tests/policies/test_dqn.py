"""DQNPolicy: the exact target and loss (plain and double), target-network cadence and the sparse
``target_sync`` key, the epsilon schedule, exploration, bad input, state, and runs through the CLI."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gymnasium import spaces

from policies import PolicyConfigError, get_policy_class
from policies.dqn import DQNPolicy, linear_epsilon
from rlearn.nn import MLP
from tests.policies.reports import host_info

OBS = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
ACT = spaces.Discrete(2)
SMALL = dict(hidden_sizes=[16, 16], batch_size=8, learning_starts=0, lr=1e-2, target_update_interval=3)


def make_policy(obs_space=OBS, act_space=ACT, seed=0, **cfg) -> DQNPolicy:
    return DQNPolicy({**SMALL, **cfg}, obs_space, act_space, seed=seed)


def make_batch(policy: DQNPolicy, n: int = 8, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)

    def t(shape, low=-1.0, high=1.0):
        return torch.as_tensor(rng.uniform(low, high, size=shape), dtype=torch.float32)

    return dict(
        obs=t((n, *policy.obs_shape)),
        action=torch.as_tensor(rng.integers(0, policy.n_actions, size=n), dtype=torch.long),
        reward=t((n,), 0.0, 1.0),
        next_obs=t((n, *policy.obs_shape)),
        terminated=torch.as_tensor(rng.integers(0, 2, size=n), dtype=torch.float32),
    )


def params(module: torch.nn.Module) -> list:
    return [p.detach().clone() for p in module.parameters()]


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def set_linear_q(net: MLP, weights_per_action) -> None:
    """Make a one-layer Q-network compute ``Q(s, a) = w_a . s`` exactly."""
    layer = net.layers[0]
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weights_per_action, dtype=torch.float32))
        layer.bias.zero_()


# --------------------------------------------------------------------------------- target and loss
def hand_made_policy(double_q: bool) -> DQNPolicy:
    """Linear Q-networks (no hidden layer) on 2-d observations and 2 actions, with chosen weights:
    online Q(s) = [s0, s1], target Q'(s) = [2 s0, -s1]."""
    obs = spaces.Box(-10.0, 10.0, shape=(2,), dtype=np.float32)
    policy = DQNPolicy({**SMALL, "hidden_sizes": [1], "gamma": 0.5, "double_q": double_q}, obs, ACT, seed=0)
    # replace the networks by linear ones (hidden_sizes must be non-empty, so build them by hand)
    policy.q_net = MLP([2, 2])
    policy.q_target = MLP([2, 2])
    set_linear_q(policy.q_net, [[1.0, 0.0], [0.0, 1.0]])
    set_linear_q(policy.q_target, [[2.0, 0.0], [0.0, -1.0]])
    return policy


@pytest.mark.parametrize("double_q, expected", [
    # next_obs (1, 3): online Q = [1, 3] picks a'=1 (double), target Q' = [2, -3]
    # next_obs (4, -2): online Q = [4, -2] picks a'=0, target Q' = [8, 2]
    # plain:  y = r + 0.5 * (1 - d) * max Q'     -> [1 + 0.5*2, 0 + 0.5*8 * 0] = [2.0, 0.0]  (2nd terminated)
    # double: y = r + 0.5 * (1 - d) * Q'(s', a') -> [1 + 0.5*(-3), 0]           = [-0.5, 0.0]
    (False, [2.0, 0.0]),
    (True, [-0.5, 0.0]),
])
def test_target_hand_made_case(double_q, expected):
    policy = hand_made_policy(double_q)
    target = policy.compute_target(torch.tensor([1.0, 0.0]), torch.tensor([[1.0, 3.0], [4.0, -2.0]]),
                                   torch.tensor([0.0, 1.0]))
    assert target.tolist() == expected


def test_double_and_plain_targets_differ_only_in_the_next_action():
    """With a non-terminal row where the online and target networks disagree on argmax, the plain target
    is the larger one (the max operator's over-estimation); where they agree, both are equal."""
    plain, double = hand_made_policy(False), hand_made_policy(True)
    next_obs = torch.tensor([[1.0, 3.0], [4.0, -2.0]])  # disagree on row 0, agree on row 1
    args = (torch.zeros(2), next_obs, torch.zeros(2))
    y_plain, y_double = plain.compute_target(*args), double.compute_target(*args)
    assert y_plain.tolist() == [1.0, 4.0] and y_double.tolist() == [-1.5, 4.0]


@pytest.mark.parametrize("loss", ["huber", "mse"])
@pytest.mark.parametrize("double_q", [False, True])
def test_forward_learn_is_the_textbook_update(loss, double_q):
    """One iteration against an independent recomputation: target, loss, clipped gradient, Adam step."""
    policy = make_policy(double_q=double_q, loss=loss, max_grad_norm=0.01, gamma=0.9)
    reference_net = MLP([3, 16, 16, 2])
    reference_net.load_state_dict(policy.q_net.state_dict())
    reference_target = MLP([3, 16, 16, 2])
    reference_target.load_state_dict(policy.q_target.state_dict())
    batch = make_batch(policy)

    # the naive reference, row by row
    y = []
    for i in range(8):
        with torch.no_grad():
            q_next = reference_target(batch["next_obs"][i])
            a_next = int(reference_net(batch["next_obs"][i]).argmax()) if double_q else int(q_next.argmax())
            y.append(float(batch["reward"][i]) + 0.9 * (1 - float(batch["terminated"][i])) * float(q_next[a_next]))
    q = torch.stack([reference_net(batch["obs"][i])[int(batch["action"][i])] for i in range(8)])
    errors = q - torch.tensor(y)
    if loss == "huber":
        per_row = torch.where(errors.abs() < 1, 0.5 * errors ** 2, errors.abs() - 0.5)
    else:
        per_row = errors ** 2
    ref_loss = per_row.mean()
    ref_loss.backward()
    norm = math.sqrt(sum(float(p.grad.square().sum()) for p in reference_net.parameters()))
    optimizer = torch.optim.Adam(reference_net.parameters(), lr=1e-2)
    torch.nn.utils.clip_grad_norm_(reference_net.parameters(), 0.01)
    optimizer.step()

    info = host_info(policy._forward_learn(batch))
    assert float(info["q_loss"]) == pytest.approx(float(ref_loss.detach()), rel=1e-5)
    assert float(info["q_value"]) == pytest.approx(float(q.detach().mean()), rel=1e-5)
    assert float(info["target_q_value"]) == pytest.approx(float(np.mean(y)), rel=1e-5, abs=1e-6)
    assert float(info["grad_norm"]) == pytest.approx(norm, rel=1e-5)
    assert norm > 0.01  # clipping really happened
    for mine, ref in zip(policy.q_net.parameters(), reference_net.parameters()):
        torch.testing.assert_close(mine, ref, rtol=1e-5, atol=1e-6)


def test_huber_loss_exact_numbers():
    """Errors 0.5 and 3 (one inside, one outside the quadratic zone): (0.125 + 2.5) / 2 = 1.3125."""
    policy = hand_made_policy(False)
    policy.gamma = 0.0  # y = r
    batch = dict(obs=torch.tensor([[2.0, 0.0], [0.0, 1.0]]), action=torch.tensor([0, 1]),
                 reward=torch.tensor([1.5, 4.0]), next_obs=torch.zeros(2, 2), terminated=torch.zeros(2))
    policy.optimizer = torch.optim.Adam(policy.q_net.parameters(), lr=0.0)
    info = host_info(policy._forward_learn(batch))  # Q(s, a) = [2, 1], y = [1.5, 4]
    assert float(info["q_loss"]) == 1.3125
    assert float(info["q_value"]) == 1.5 and float(info["target_q_value"]) == 2.75
    policy.loss_fn = F.mse_loss
    assert float(host_info(policy._forward_learn(batch))["q_loss"]) == (0.25 + 9.0) / 2


def test_no_clipping_reports_the_plain_norm():
    policy = make_policy(max_grad_norm=None, lr=0.0)
    info = host_info(policy._forward_learn(make_batch(policy)))
    norm = math.sqrt(sum(float(p.grad.square().sum()) for p in policy.q_net.parameters()))
    assert float(info["grad_norm"]) == pytest.approx(norm, rel=1e-6)


def test_the_q_network_is_the_one_relu_mlp():
    """Q(s, .) is rlearn.nn's MLP (ReLU hidden layers, linear output; tested against nn.Sequential in tests/nn)."""
    policy = make_policy()
    assert type(policy.q_net) is MLP and policy.q_net.activation == "relu" and policy.q_net.output_activation is None
    assert [layer.weight.shape[1] for layer in policy.q_net.layers] == [3, *policy.cfg["hidden_sizes"]]


def test_host_values_reads_mixed_dtypes_both_ways():
    """On the CPU one ``item()`` per value, elsewhere one promoting ``stack().tolist()``: the same numbers."""
    from rlearn.rl.replay_batch import host_values

    tensors = [torch.tensor(-3), torch.tensor(7), torch.tensor(2.5)]
    assert host_values(tensors) == [-3, 7, 2.5]
    assert torch.stack(tensors).tolist() == [-3.0, 7.0, 2.5]  # the accelerator path's promotion
    values = host_values([torch.tensor(1.25), torch.tensor(float("nan"))])
    assert values[0] == 1.25 and math.isnan(values[1]) and all(type(v) is float for v in values)


def test_greedy_actions_accept_any_numeric_observations():
    """float32 arrays go through ``from_numpy`` (no copy); float64 arrays, lists and tensors are converted:
    the same greedy actions either way."""
    policy = make_policy()
    obs = np.random.default_rng(3).uniform(-1, 1, size=(20, 3))
    expected = policy.greedy_actions(obs.astype(np.float32))
    with torch.no_grad():
        assert (expected == policy.q_net(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()).all()
    for variant in (obs, obs.astype(np.float32).tolist(), torch.as_tensor(obs, dtype=torch.float32)):
        np.testing.assert_array_equal(policy.greedy_actions(variant), expected)
    assert expected.dtype == np.int64


def test_multi_dimensional_observations_are_flattened_like_one_dimensional_ones():
    """A [2, 3] observation space learns exactly as the same numbers in a (6,) space, and a NaN in it is
    still named; acting flattens too."""
    grid = make_policy(obs_space=spaces.Box(-1.0, 1.0, shape=(2, 3), dtype=np.float32))
    flat = make_policy(obs_space=spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32))
    flat.q_net.load_state_dict(grid.q_net.state_dict())
    flat.q_target.load_state_dict(grid.q_target.state_dict())
    for i in range(3):
        batch = make_batch(grid, seed=i)
        flat_batch = {**batch, "obs": batch["obs"].reshape(8, 6), "next_obs": batch["next_obs"].reshape(8, 6)}
        assert host_info(grid._forward_learn(batch)) == host_info(flat._forward_learn(flat_batch))
    assert same(params(grid.q_net), params(flat.q_net))
    obs = np.random.default_rng(0).uniform(-1, 1, size=(5, 2, 3)).astype(np.float32)
    np.testing.assert_array_equal(grid.greedy_actions(obs), flat.greedy_actions(obs.reshape(5, 6)))
    batch = make_batch(grid)
    batch["next_obs"][3, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"\['next_obs'\]"):
        host_info(grid._forward_learn(batch))


def test_huge_finite_rewards_are_accepted():
    policy = make_policy(lr=0.0)
    batch = make_batch(policy)
    batch["reward"][:] = 3e38  # finite; their float32 sum would overflow
    host_info(policy._forward_learn(batch))  # not refused as non-finite
    assert policy.update_count == 1


# ------------------------------------------------------------------------------ target network sync
@pytest.mark.parametrize("interval", [1, 3, 5])
def test_target_sync_cadence_and_sparse_key(interval):
    """The target network changes exactly on iterations interval, 2*interval, ...; `target_sync` (1) is
    reported on those and only those; every other declared key appears on every iteration."""
    policy = make_policy(target_update_interval=interval)
    batch = make_batch(policy)
    declared = policy._monitor_vars_learn()
    assert declared == ["q_loss", "q_value", "target_q_value", "grad_norm", "target_sync"]
    assert policy.monitor_vars() == declared + ["collector/epsilon"]
    for i in range(1, 4 * interval + 1):
        before = params(policy.q_target)
        info = host_info(policy._forward_learn(batch))
        synced = i % interval == 0
        assert set(info) <= set(declared)
        assert ("target_sync" in info) == synced, i
        assert set(info) - {"target_sync"} == set(declared) - {"target_sync"}
        if synced:
            assert info["target_sync"] == 1
            assert same(params(policy.q_target), params(policy.q_net))  # hard copy
        else:
            assert same(params(policy.q_target), before)
    assert policy.update_count == 4 * interval


def test_soft_target_update_with_tau():
    policy = make_policy(target_update_interval=2, tau=0.25)
    batch = make_batch(policy)
    host_info(policy._forward_learn(batch))
    target_before = params(policy.q_target)
    info = host_info(policy._forward_learn(batch))
    assert info["target_sync"] == 1
    for new, old, online in zip(params(policy.q_target), target_before, params(policy.q_net)):
        torch.testing.assert_close(new, old + 0.25 * (online - old))


def test_targets_start_as_copies_and_have_no_gradients():
    policy = make_policy()
    assert same(params(policy.q_target), params(policy.q_net))
    assert not any(p.requires_grad for p in policy.q_target.parameters())
    host_info(policy._forward_learn(make_batch(policy)))
    assert all(p.grad is None for p in policy.q_target.parameters())


# --------------------------------------------------------------------------------------- epsilon
@pytest.mark.parametrize("envstep, expected", [
    (0, 1.0), (1000, 0.88), (4000, 0.52), (7999, 1.0 - 0.96 * 7999 / 8000), (8000, 0.04), (50_000, 0.04),
])
def test_linear_epsilon_values(envstep, expected):
    assert linear_epsilon(envstep, 1.0, 0.04, 8000) == pytest.approx(expected, abs=1e-12)


def test_epsilon_schedule_with_learning_starts_and_zero_steps():
    policy = make_policy(learning_starts=1000, exploration_initial_eps=1.0, exploration_final_eps=0.04,
                         exploration_steps=8000)
    assert [policy.epsilon(s) for s in (0, 999)] == [1.0, 1.0]  # random actions before learning starts
    assert policy.epsilon(1000) == pytest.approx(0.88)
    assert policy.epsilon(2000) == pytest.approx(0.76)
    assert policy.epsilon(10_000) == 0.04
    assert make_policy(exploration_steps=0, exploration_final_eps=0.1).epsilon(0) == 0.1


def test_collect_is_epsilon_greedy():
    policy = make_policy(exploration_initial_eps=0.3, exploration_final_eps=0.3, exploration_steps=10)
    obs = np.random.default_rng(0).uniform(-1, 1, size=(4000, 3)).astype(np.float32)
    greedy = policy.greedy_actions(obs)
    action = policy._forward_collect(obs, envstep=100)["action"]
    assert action.shape == (4000,) and action.dtype == np.int64
    differ = np.mean(action != greedy)
    assert differ == pytest.approx(0.3 / 2, abs=0.03)  # random with p=0.3, of which half pick the other action


def test_collect_returns_epsilon_as_a_collect_side_key():
    policy = make_policy(learning_starts=10, exploration_initial_eps=1.0, exploration_final_eps=0.5,
                         exploration_steps=110)
    assert policy._monitor_vars_collect() == ["epsilon"]
    obs = np.zeros((2, 3), np.float32)
    out = policy._forward_collect(obs, envstep=5)
    assert out["epsilon"] == 1.0 and type(out["epsilon"]) is float
    out = policy._forward_collect(obs, envstep=55)
    assert out["epsilon"] == pytest.approx(0.75) and type(out["epsilon"]) is float
    assert set(out) == {"action", "epsilon"}


def test_random_actions_before_learning_starts_cover_every_action():
    policy = make_policy(act_space=spaces.Discrete(5), learning_starts=100)
    action = policy._forward_collect(np.zeros((5000, 3), np.float32), envstep=0)["action"]
    counts = np.bincount(action, minlength=5)
    assert counts.sum() == 5000 and counts.min() > 900


def test_eval_is_greedy_and_actions_follow_the_space_start():
    policy = make_policy(act_space=spaces.Discrete(3, start=-1), exploration_initial_eps=0.0,
                         exploration_final_eps=0.0)
    obs = np.random.default_rng(1).uniform(-1, 1, size=(50, 3)).astype(np.float32)
    with torch.no_grad():
        expected = policy.q_net(torch.from_numpy(obs)).argmax(1).numpy()
    np.testing.assert_array_equal(policy._forward_eval(obs), expected - 1)
    out = policy._forward_collect(obs, envstep=10)
    np.testing.assert_array_equal(out["action"], expected)  # stored: indices from 0
    np.testing.assert_array_equal(out["env_action"], expected - 1)  # sent to the env: the space's numbering


# -------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("override, match", [
    (dict(taus=0.1), "policy.taus"),
    (dict(tau=0.0), "policy.tau"),
    (dict(gamma=1.5), "policy.gamma"),
    (dict(hidden_sizes=[]), "policy.hidden_sizes"),
    (dict(hidden_sizes=[64, 0]), r"policy.hidden_sizes\[1\]"),
    (dict(target_update_interval=0), "policy.target_update_interval"),
    (dict(batch_size=2.5), "policy.batch_size"),
    (dict(exploration_final_eps=1.5), "policy.exploration_final_eps"),
    (dict(exploration_steps=-1), "policy.exploration_steps"),
    (dict(loss="l1"), "policy.loss"),
    (dict(max_grad_norm=0), "policy.max_grad_norm"),
    (dict(double_q="yes"), "policy.double_q"),
    (dict(lr=float("nan")), "policy.lr"),
])
def test_bad_config_names_the_key(override, match):
    with pytest.raises(PolicyConfigError, match=match):
        make_policy(**override)


def test_bad_spaces():
    with pytest.raises(TypeError, match="Discrete action space"):
        make_policy(act_space=spaces.Box(-1, 1, (1,)))
    with pytest.raises(TypeError, match="Box observation space"):
        make_policy(obs_space=spaces.Discrete(4))


@pytest.mark.parametrize("mutate, error, match", [
    (lambda b: b.pop("terminated"), KeyError, "terminated"),
    (lambda b: b.__setitem__("action", b["action"].float()), TypeError, r"batch\['action'\] must be an integer"),
    (lambda b: b.__setitem__("action", b["action"] + 5), ValueError, r"outside \[0, 2\)"),
    (lambda b: b.__setitem__("reward", b["reward"][:3]), ValueError, "'reward'"),
    (lambda b: b.__setitem__("obs", b["obs"][:, :2]), ValueError, "'obs'"),
    (lambda b: b.__setitem__("obs", b["obs"].numpy()), TypeError, "'obs'"),
    (lambda b: b["next_obs"].__setitem__((2, 1), float("nan")), ValueError, "next_obs"),
    (lambda b: b["reward"].__setitem__(4, float("inf")), ValueError, r"\['reward'\]"),
    (lambda b: b["obs"].__setitem__((0, 0), -float("inf")), ValueError, r"\['obs'\]"),
    # huge finite values overflow the float32 sum of the cheap check; the per-key check still names the NaN
    (lambda b: (b["reward"].fill_(3e38), b["terminated"].__setitem__(1, float("nan"))), ValueError,
     r"\['terminated'\]"),
])
def test_bad_batch_is_refused_before_any_update(mutate, error, match):
    policy = make_policy(target_update_interval=1)
    batch = make_batch(policy)
    mutate(batch)
    before = params(policy.q_net) + params(policy.q_target)
    with pytest.raises(error, match=match):
        host_info(policy._forward_learn(batch))
    assert same(before, params(policy.q_net) + params(policy.q_target)) and policy.update_count == 0


# ------------------------------------------------------------------------------------------- state
def test_state_dict_round_trip_continues_identically():
    policy = make_policy(target_update_interval=4)
    batch = make_batch(policy)
    for _ in range(3):
        host_info(policy._forward_learn(batch))
    stream = io.BytesIO()
    torch.save(policy.state_dict(), stream)
    stream.seek(0)
    clone = make_policy(target_update_interval=4, seed=7)
    clone.load_state_dict(torch.load(stream, weights_only=False))
    assert clone.update_count == 3
    a, b = host_info(policy._forward_learn(batch)), host_info(clone._forward_learn(batch))
    assert "target_sync" in a and "target_sync" in b  # the 4th iteration syncs in both
    assert float(a["q_loss"]) == float(b["q_loss"])
    assert same(params(policy.q_net), params(clone.q_net)) and same(params(policy.q_target), params(clone.q_target))
    obs = np.zeros((8, 3), np.float32)
    np.testing.assert_array_equal(policy._forward_collect(obs, 10)["action"], clone._forward_collect(obs, 10)["action"])
    with pytest.raises(ValueError, match="update_count"):
        clone.load_extra_state({"update_count": -1})


def test_modules_optimizers_and_registry():
    policy = make_policy()
    assert set(policy.modules()) == {"q_net", "q_target"} and set(policy.optimizers()) == {"q"}
    assert get_policy_class("dqn") is DQNPolicy and DQNPolicy.on_policy is False
    import policies
    assert policies.DQNPolicy is DQNPolicy


def test_learns_from_real_replay_samples():
    """The replay buffer's discrete actions (int64) feed the update directly, from a real collect."""
    from rlearn.buffer import ReplayBuffer, action_dtype_for
    from rlearn.collect import Collector
    from rlearn.env import make_vector_env

    env = make_vector_env("CartPole-v1", 2, seed=0)
    try:
        policy = DQNPolicy({**SMALL, "learning_starts": 50}, env.single_observation_space, env.single_action_space, seed=0)
        buffer = ReplayBuffer(500, env.single_observation_space.shape, (), seed=0,
                              action_dtype=action_dtype_for(env.single_action_space))
        buffer.add(Collector(env, policy, seed=0).collect(100).transitions)
        batch = buffer.sample(8)
        assert batch["action"].dtype == torch.long
        info = host_info(policy._forward_learn(batch))
        assert math.isfinite(float(info["q_loss"]))
    finally:
        env.close()


# ------------------------------------------------------------------------------ config and pipeline
def test_bundled_config_has_every_key_and_rl_zoo_values():
    from rlearn.config import REQUIRED_KEYS, get_by_path, load_config

    raw = load_config("dqn_cartpole")  # the bundled file states only what differs; resolved, it has every key
    for key in (*REQUIRED_KEYS, "device", "env.asynchronous", "buffer.size", "train.collect_steps",
                "train.updates_per_step", "learner.monitor_windows", "eval.stop_value", "policy.type"):
        get_by_path(raw, key)
    assert set(DQNPolicy.default_config) <= set(raw["policy"])
    cfg = load_config("dqn_cartpole")
    p = cfg["policy"]
    assert (p["type"], p["lr"], p["batch_size"], p["learning_starts"], p["hidden_sizes"]) == ("dqn", 2.3e-3, 64, 1000, [256, 256])
    assert (p["exploration_final_eps"], p["exploration_steps"], p["gamma"]) == (0.04, 8000, 0.99)
    assert cfg["buffer"]["size"] == 100_000 and cfg["train"]["max_env_steps"] == 50_000
    assert cfg["train"]["collect_steps"] * cfg["train"]["updates_per_step"] == 128  # gradient_steps per phase
    assert p["target_update_interval"] == 128  # one sync per training phase, as SB3's 10 env steps give


def _run_cli(work, *overrides):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "rlearn", "train", "dqn_cartpole", "--work-dir", str(work), "--no-progress",
           "--set", "train.max_env_steps=1536", "policy.learning_starts=256", "policy.hidden_sizes=[32,32]",
           "policy.target_update_interval=40", "learner.log_freq=100", "eval.freq=none", "eval.episodes=1",
           "eval.num_envs=1", "checkpoint.freq=none", "buffer.size=2000", *overrides]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_rlearn_train_cli_shows_dqn_keys_and_the_sparse_target_sync(tmp_path):
    """A short real run through `rlearn train dqn_cartpole`: every learner key in the table and TensorBoard;
    `target_sync` is averaged over the syncs in each window (always 1) and counted where it happened."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    work = tmp_path / "run"
    _run_cli(work)
    log = (work / "dqn_cartpole.log").read_text()
    for key in ("q_loss_avg", "q_value_avg", "target_sync_avg", "grad_norm_avg"):
        assert key in log, key
    acc = EventAccumulator(str(work / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for key in make_policy()._monitor_vars_learn():
        assert f"learner_iter/{key}_avg" in tags, key
    # 1536 env steps in 6 collects of 256, learning once envstep > 256 (the first collect only fills the
    # buffer, as in SB3): 5 phases of 128 = 640 iterations
    steps = [100, 200, 300, 400, 500, 600, 640]  # a table every 100 iterations, and a last one
    q_loss = acc.Scalars("learner_iter/q_loss_avg")
    assert [e.step for e in q_loss] == steps
    assert all(math.isfinite(e.value) for e in q_loss)
    sync = acc.Scalars("learner_iter/target_sync_avg")
    assert [e.step for e in sync] == steps and all(e.value == 1.0 for e in sync)


def test_epsilon_is_a_collect_side_key_in_table_and_tensorboard(tmp_path):
    """`epsilon` from _forward_collect reaches the table and TensorBoard as `collector_iter/epsilon_avg`,
    following the schedule (1.0 before learning starts, then falling to the final value)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    work = tmp_path / "run"
    _run_cli(work, "policy.exploration_steps=1024", "policy.exploration_final_eps=0.1")
    log = (work / "dqn_cartpole.log").read_text()
    assert "epsilon_avg" in log
    acc = EventAccumulator(str(work / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    epsilon = acc.Scalars("collector_iter/epsilon_avg")
    assert epsilon and all(0.1 - 1e-9 <= e.value <= 1.0 for e in epsilon)
    assert epsilon[-1].value == pytest.approx(0.1)  # the schedule ended at step 1024 of 1536
    assert [e.value for e in epsilon] == sorted((e.value for e in epsilon), reverse=True)


@pytest.mark.slow
def test_learns_cartpole_within_50k_env_steps(tmp_path):
    """rl-zoo settings, one seed: the greedy policy reaches a mean return >= 475 within 50k env steps."""
    from rlearn.config import load_config
    from rlearn.run import train

    cfg = load_config("dqn_cartpole", overrides=["seed=0", "eval.stop_value=475", "eval.freq=2500",
                                                 "checkpoint.freq=none"])
    result = train(cfg, work_dir=tmp_path / "run", progress=False)
    # collects come in chunks of 256 env steps, so a 50k-step run ends at 50,176
    assert result.envstep <= 50_176 and result.last_eval["episode_return_mean"] >= 475, result.last_eval


def test_example_script_trains_and_reports(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "dqn_cartpole.py"
    spec = importlib.util.spec_from_file_location("dqn_cartpole_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main(["--steps", "1536", "--double-q", "--work-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "final evaluation return:" in out and str(tmp_path / "run") in out
    assert "'double_q': True" in (tmp_path / "run" / "config.py").read_text()  # the resolved config


def test_adam_steps_directly_and_matches_plain_adam_over_several_iterations():
    """After the first step (which creates Adam's state) the policy steps through AdamStep's direct kernel
    call where the running torch allows it, with the parameters of a plain ``optimizer.step()`` reference."""
    from rlearn.optim import direct_step_ok

    policy = make_policy(max_grad_norm=0.05, gamma=0.9, target_update_interval=100)
    reference = MLP([3, 16, 16, 2])
    reference.load_state_dict(policy.q_net.state_dict())
    target = MLP([3, 16, 16, 2])
    target.load_state_dict(policy.q_target.state_dict())
    optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2)
    for i in range(4):
        batch = make_batch(policy, seed=i)
        with torch.no_grad():
            y = batch["reward"] + 0.9 * (1 - batch["terminated"]) * target(batch["next_obs"]).max(1).values
        q = reference(batch["obs"]).gather(1, batch["action"][:, None]).squeeze(1)
        optimizer.zero_grad()
        F.smooth_l1_loss(q, y).backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.05)
        optimizer.step()
        info = host_info(policy._forward_learn(batch))
        assert all(type(value) is float or value.dim() == 0 for value in info.values())  # named 0-d tensors
    for mine, ref in zip(policy.q_net.parameters(), reference.parameters()):
        torch.testing.assert_close(mine, ref, rtol=1e-5, atol=1e-6)
    steps = policy.adam_step(policy.optimizer)
    assert steps.direct_steps + steps.fallback_steps == 4
    assert steps.direct_steps == (3 if direct_step_ok() else 0)


def test_a_replaced_optimizer_is_the_one_that_steps():
    """Assigning ``policy.optimizer`` (as a user or test may) takes effect: lr 0 leaves the network as it was."""
    policy = make_policy()
    policy.optimizer = torch.optim.Adam(policy.q_net.parameters(), lr=0.0)
    before = params(policy.q_net)
    host_info(policy._forward_learn(make_batch(policy)))
    host_info(policy._forward_learn(make_batch(policy, seed=1)))
    assert same(before, params(policy.q_net))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_cuda_like_on_cpu():
    """The same networks on CUDA and CPU: the same info keys and values within float tolerance over iterations
    that include a target sync, parameters on the device and close to the CPU ones; acting returns int64
    numpy actions. The CPU batches are moved by the policy itself."""
    cpu = make_policy(target_update_interval=2)
    gpu = DQNPolicy({**SMALL, "target_update_interval": 2}, OBS, ACT, device="cuda", seed=0)
    gpu.q_net.load_state_dict(cpu.q_net.state_dict())
    gpu.q_target.load_state_dict(cpu.q_target.state_dict())
    assert all(p.is_cuda for p in list(gpu.q_net.parameters()) + list(gpu.q_target.parameters()))
    for i in range(3):
        batch = make_batch(cpu, seed=i)
        info_cpu, info_gpu = host_info(cpu._forward_learn(batch)), host_info(gpu._forward_learn(batch))
        assert set(info_gpu) == set(info_cpu)
        for key in info_cpu:
            assert info_gpu[key] == pytest.approx(info_cpu[key], rel=1e-4, abs=1e-6), key
    for mine, ref in zip(gpu.q_net.parameters(), cpu.q_net.parameters()):
        torch.testing.assert_close(mine.cpu(), ref, rtol=1e-4, atol=1e-5)
    obs = np.zeros((8, 3), np.float32)
    action = gpu._forward_collect(obs, 10**6)["action"]
    assert isinstance(action, np.ndarray) and action.dtype == np.int64 and action.shape == (8,)
    assert gpu._forward_eval(obs).shape == (8,)
