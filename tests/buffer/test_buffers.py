"""ReplayBuffer (ring storage, uniform sampling, state) and on-policy rollout tensors."""

from __future__ import annotations

import io

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlearn.buffer import FIELDS, ReplayBuffer, action_dtype_for, flatten_rollout, rollout_to_tensors
from rlearn.collect import Collector
from rlearn.env import make_vector_env


def batch(ids, obs_shape=(2,), action_shape=(1,), lead=None):
    """Transitions whose every field encodes the item id, so rows can be traced through the buffer."""
    ids = np.asarray(ids, dtype=np.float64)
    out = {
        "obs": np.broadcast_to(ids[:, None], (len(ids), *obs_shape)).astype(np.float32) if obs_shape else ids.astype(np.float32),
        "action": (np.broadcast_to(-ids[:, None], (len(ids), *action_shape)) if action_shape else -ids).astype(np.float32),
        "reward": (ids * 10).astype(np.float32),
        "next_obs": (np.broadcast_to(ids[:, None] + 0.5, (len(ids), *obs_shape)) if obs_shape else ids + 0.5).astype(np.float32),
        "terminated": (ids % 2).astype(np.float32),
    }
    if lead is not None:
        out = {k: v.reshape(*lead, *v.shape[1:]) for k, v in out.items()}
    return out


def stored_ids(buffer):
    """The buffer's contents oldest first, read from its state dict."""
    state = buffer.state_dict()
    obs = state["data"]["obs"][:, 0]
    if state["size"] == buffer.capacity:
        obs = np.roll(obs, -state["pos"])
    return obs.tolist()


# ------------------------------------------------------------------------------------------- add
def test_wrap_around_exact_contents():
    buffer = ReplayBuffer(5, (2,), (1,))
    assert len(buffer) == 0 and not buffer.full
    assert buffer.add(batch([0, 1, 2])) == 3
    assert len(buffer) == 3 and stored_ids(buffer) == [0, 1, 2]
    buffer.add(batch([3, 4, 5, 6]))
    assert len(buffer) == 5 and buffer.full
    state = buffer.state_dict()
    assert state["pos"] == 2
    assert state["data"]["obs"][:, 0].tolist() == [5, 6, 2, 3, 4]  # 5 and 6 overwrote the two oldest
    assert state["data"]["next_obs"][:, 1].tolist() == [5.5, 6.5, 2.5, 3.5, 4.5]
    assert state["data"]["action"][:, 0].tolist() == [-5, -6, -2, -3, -4]
    assert state["data"]["reward"].tolist() == [50, 60, 20, 30, 40]
    assert state["data"]["terminated"].tolist() == [1, 0, 0, 1, 0]
    buffer.add(batch(range(7, 19)))  # more than the capacity at once: only the newest 5 survive
    assert stored_ids(buffer) == [14, 15, 16, 17, 18] and buffer.state_dict()["pos"] == (2 + 12) % 5


def test_collector_layout_is_flattened_step_major():
    buffer = ReplayBuffer(10, (2,), (1,))
    buffer.add(batch(range(6), lead=(3, 2)))  # [n_steps=3, num_envs=2, ...]
    assert stored_ids(buffer) == [0, 1, 2, 3, 4, 5]
    buffer.add({**batch(range(6, 8)), "truncated": np.zeros(2, np.float32), "log_prob": np.zeros(2)})  # extras ignored
    assert len(buffer) == 8


def test_scalar_shapes_and_integer_dtypes():
    buffer = ReplayBuffer(4, (), (), obs_dtype=np.int64, action_dtype=np.int64)
    buffer.add({"obs": np.array([3, 4]), "action": np.array([1, 0]), "reward": np.array([1.0, 2.0]),
                "next_obs": np.array([4, 5]), "terminated": np.array([False, True])})
    out = buffer.sample(8)
    assert out["obs"].shape == (8,) and out["action"].shape == (8,)
    assert out["action"].dtype == torch.int64  # discrete actions: ready for gather / indexing
    assert all(v.dtype == torch.float32 for k, v in out.items() if k != "action")
    assert set(zip(out["obs"].tolist(), out["next_obs"].tolist())) <= {(3.0, 4.0), (4.0, 5.0)}
    assert set(zip(out["obs"].tolist(), out["action"].tolist())) <= {(3.0, 1), (4.0, 0)}


@pytest.mark.parametrize("space, dtype", [
    (gym.spaces.Discrete(3), np.int64),
    (gym.spaces.Discrete(3, dtype=np.int32), np.int32),
    (gym.spaces.MultiDiscrete([2, 3]), np.int64),
    (gym.spaces.Box(-1, 1, (2,)), np.float32),
    (gym.spaces.Box(-1, 1, (2,), dtype=np.float64), np.float32),
])
def test_action_dtype_for_spaces(space, dtype):
    assert action_dtype_for(space) == np.dtype(dtype)


@pytest.mark.parametrize("storage", [np.int64, np.int32, np.uint8])
def test_discrete_actions_are_sampled_as_long_and_gather_directly(storage):
    buffer = ReplayBuffer(16, (2,), (), action_dtype=storage, seed=0)
    ids = np.arange(10)
    buffer.add({"obs": np.stack([ids, ids], 1).astype(np.float32), "action": (ids % 3).astype(storage),
                "reward": np.zeros(10, np.float32), "next_obs": np.zeros((10, 2), np.float32),
                "terminated": np.zeros(10, np.float32)})
    out = buffer.sample(32)
    assert out["action"].dtype == torch.long and out["action"].shape == (32,)
    assert out["action"].tolist() == [int(o) % 3 for o in out["obs"][:, 0].tolist()]
    q = torch.arange(32 * 3, dtype=torch.float32).reshape(32, 3)
    picked = q.gather(1, out["action"].unsqueeze(1)).squeeze(1)  # no .long() needed
    assert picked.tolist() == [3 * i + a for i, a in enumerate(out["action"].tolist())]


def test_box_actions_stay_float32():
    buffer = ReplayBuffer(4, (2,), (1,), action_dtype=action_dtype_for(gym.spaces.Box(-2, 2, (1,))))
    buffer.add(batch([1, 2]))
    assert buffer.sample(4)["action"].dtype == torch.float32


def _discrete_state(action_values, action_dtype):
    buffer = ReplayBuffer(4, (2,), (), action_dtype=action_dtype, seed=3)
    n = len(action_values)
    buffer.add({"obs": np.arange(2 * n, dtype=np.float32).reshape(n, 2), "action": np.asarray(action_values, action_dtype),
                "reward": np.ones(n, np.float32), "next_obs": np.zeros((n, 2), np.float32),
                "terminated": np.zeros(n, np.float32)})
    return buffer.state_dict()


def test_discrete_state_round_trips_and_float_actions_are_refused():
    new = _discrete_state([1, 0], np.int64)
    buffer = ReplayBuffer(4, (2,), (), action_dtype=np.int64)
    buffer.load_state_dict(new)
    assert buffer.state_dict()["data"]["action"].tolist() == [1, 0]
    before = buffer.state_dict()
    with pytest.raises(ValueError, match="saved action_dtype='<f4' but this buffer has '<i8'"):
        buffer.load_state_dict(_discrete_state([0.0, 1.0], np.float32))
    assert buffer.state_dict()["data"]["action"].tolist() == before["data"]["action"].tolist()
    # a Box buffer still refuses a state of another action dtype
    box = ReplayBuffer(4, (2,), ())
    with pytest.raises(ValueError, match="saved action_dtype='<i8' but this buffer has '<f4'"):
        box.load_state_dict(new)


def test_uint8_images_are_stored_compactly_and_returned_as_float32():
    buffer = ReplayBuffer(3, (4, 4), (2,), obs_dtype=np.uint8)
    obs = np.arange(32, dtype=np.uint8).reshape(2, 4, 4)
    buffer.add({"obs": obs, "action": np.zeros((2, 2)), "reward": np.zeros(2), "next_obs": obs + 1, "terminated": np.zeros(2)})
    assert buffer.state_dict()["data"]["obs"].dtype == np.uint8
    sampled = buffer.sample(5)
    assert sampled["obs"].dtype == torch.float32 and sampled["obs"].shape == (5, 4, 4)
    assert all(int(o[0, 0]) in (0, 16) for o in sampled["obs"])


@pytest.mark.parametrize(
    "mutate, error, match",
    [
        (lambda b: b.pop("reward"), KeyError, r"lack \['reward'\]"),
        (lambda b: b.update(obs=np.zeros((3, 5), np.float32)), ValueError, r"'obs' has shape \(3, 5\); expected \[n, \*\(2,\)\]"),
        (lambda b: b.update(action=np.zeros((3, 2), np.float32)), ValueError, r"'action' has shape \(3, 2\), expected \(3, 1\)"),
        (lambda b: b.update(reward=np.zeros(4, np.float32)), ValueError, r"'reward' has shape \(4,\), expected \(3,\)"),
        (lambda b: b["next_obs"].__setitem__((1, 0), np.nan), ValueError, r"'next_obs' holds 1 non-finite value\(s\); nothing was added"),
        (lambda b: b["reward"].__setitem__(0, np.inf), ValueError, r"'reward' holds 1 non-finite"),
        (lambda b: b.update(terminated=np.array([0, 2, 1], np.float32)), ValueError, r"'terminated' must hold 0/1 flags"),
        (lambda b: b.update(obs=np.array([["a", "b"]] * 3)), TypeError, r"'obs' has dtype <U1"),
    ],
)
def test_bad_add_is_refused_and_loses_nothing(mutate, error, match):
    buffer = ReplayBuffer(4, (2,), (1,))
    buffer.add(batch([0, 1, 2]))
    before = buffer.state_dict()
    bad = batch([7, 8, 9])
    mutate(bad)
    with pytest.raises(error, match=match):
        buffer.add(bad)
    after = buffer.state_dict()
    assert after["pos"] == before["pos"] and after["size"] == before["size"]
    for key in FIELDS:
        np.testing.assert_array_equal(after["data"][key], before["data"][key])


def test_float_into_integer_storage_is_refused():
    buffer = ReplayBuffer(4, (), (), obs_dtype=np.int64)
    with pytest.raises(TypeError, match=r"'obs' has dtype float32, which cannot be stored as int64"):
        buffer.add(batch([1, 2], obs_shape=(), action_shape=()))
    with pytest.raises(TypeError, match="expects a dict"):
        buffer.add([1, 2])


@pytest.mark.parametrize("kwargs, match", [
    (dict(capacity=0, obs_shape=(2,), action_shape=(1,)), "capacity must be a positive int"),
    (dict(capacity=2.5, obs_shape=(2,), action_shape=(1,)), "capacity must be a positive int"),
    (dict(capacity=4, obs_shape=(-1,), action_shape=(1,)), "obs_shape must be a tuple of non-negative ints"),
    (dict(capacity=4, obs_shape=None, action_shape=(1,)), "obs_shape must be a tuple of ints"),
    (dict(capacity=4, obs_shape=(2,), action_shape=(1,), obs_dtype=object), "obs_dtype must be a numeric dtype"),
])
def test_constructor_checks(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ReplayBuffer(**kwargs)


# ---------------------------------------------------------------------------------------- sample
def test_sample_empty_and_bad_batch_size():
    buffer = ReplayBuffer(4, (2,), (1,))
    with pytest.raises(RuntimeError, match="the buffer is empty"):
        buffer.sample(2)
    buffer.add(batch([1]))
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="batch_size must be a positive int"):
            buffer.sample(bad)


def test_sample_rows_are_whole_transitions_as_float32_tensors():
    buffer = ReplayBuffer(6, (2,), (1,), seed=0)
    buffer.add(batch(range(9)))  # ids 3..8 remain
    out = buffer.sample(256)
    assert list(out) == ["obs", "action", "reward", "next_obs", "terminated"]
    assert out["obs"].shape == (256, 2) and out["action"].shape == (256, 1) and out["reward"].shape == (256,)
    assert all(v.dtype == torch.float32 and v.device.type == "cpu" for v in out.values())
    ids = out["obs"][:, 0]
    assert set(ids.tolist()) == {3.0, 4.0, 5.0, 6.0, 7.0, 8.0}  # only stored items, every one of them
    torch.testing.assert_close(out["obs"][:, 1], ids)
    torch.testing.assert_close(out["action"][:, 0], -ids)
    torch.testing.assert_close(out["reward"], ids * 10)
    torch.testing.assert_close(out["next_obs"][:, 0], ids + 0.5)
    torch.testing.assert_close(out["terminated"], ids % 2)


def test_sampled_batch_owns_its_memory():
    buffer = ReplayBuffer(2, (2,), (1,), seed=0)
    buffer.add(batch([1, 1]))
    out = buffer.sample(4)
    buffer.add(batch([5, 5]))  # overwrites every slot
    assert out["obs"].eq(1).all()


def test_uniform_sampling_chi_square():
    capacity, draws = 10, 100_000
    buffer = ReplayBuffer(capacity, (2,), (1,), seed=123)
    buffer.add(batch(range(25)))  # wrapped twice and a half
    counts = np.zeros(capacity)
    for _ in range(draws // 500):
        ids = buffer.sample(500)["obs"][:, 0].numpy().astype(int)
        np.add.at(counts, ids - 15, 1)
    expected = draws / capacity
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert counts.sum() == draws
    assert chi2 < 27.88  # chi-square critical value, 9 degrees of freedom, p = 0.001


def test_seeded_buffers_sample_identically():
    a, b = ReplayBuffer(50, (2,), (1,), seed=4), ReplayBuffer(50, (2,), (1,), seed=4)
    a.add(batch(range(30)))
    b.add(batch(range(30)))
    for _ in range(3):
        torch.testing.assert_close(a.sample(16), b.sample(16))


@pytest.mark.parametrize("field", ["obs", "action", "next_obs", "reward"])
@pytest.mark.parametrize("bad", [np.nan, -np.inf])
def test_add_names_the_non_finite_field_whichever_it_is(field, bad):
    buffer = ReplayBuffer(10, (2,), (1,), seed=0)
    data = batch([1, 2, 3])
    data[field].reshape(-1)[1] = bad
    with pytest.raises(ValueError, match=rf"'{field}' holds 1 non-finite value\(s\); nothing was added"):
        buffer.add(data)
    assert len(buffer) == 0


def test_add_accepts_huge_finite_float64_observations_and_0_1_flags_only():
    """An overflowing float64 sum is not a non-finite value (only the exact check decides); flags must be 0/1."""
    buffer = ReplayBuffer(10, (2,), (1,), obs_dtype=np.float64, seed=0)
    data = batch([1, 2])
    data["obs"] = np.full((2, 2), 1e308)
    assert buffer.add(data) == 2
    for flags in ([0.0, -1.0], [0.5, 1.0], [2.0, 0.0]):
        with pytest.raises(ValueError, match="'terminated' must hold 0/1 flags"):
            buffer.add(dict(batch([1, 2]), terminated=np.array(flags, np.float32)))
    assert buffer.add(dict(batch([3, 4]), terminated=np.array([-0.0, 1.0], np.float32))) == 2
    assert len(buffer) == 4


# ----------------------------------------------------------------------------------------- state
def _torch_round_trip(state):
    """Through a real checkpoint encoding: rlearn's encoder and torch.load(weights_only=True)."""
    from rlearn.checkpoint import decode_state, encode_state

    stream = io.BytesIO()
    torch.save(encode_state(state), stream)
    stream.seek(0)
    return decode_state(torch.load(stream, weights_only=True))


@pytest.mark.parametrize("n_items", [0, 3, 13])
def test_state_round_trip_continues_exactly(n_items):
    a = ReplayBuffer(8, (2,), (1,), seed=7)
    a.add(batch(range(n_items)))
    if n_items:
        a.sample(5)  # advance the generator
    state = _torch_round_trip(a.state_dict())
    assert state["data"]["obs"].shape == (min(n_items, 8), 2)  # only the filled part is saved
    b = ReplayBuffer(8, (2,), (1,), seed=999)
    b.load_state_dict(state)
    assert len(b) == len(a) and stored_ids(b) == stored_ids(a)
    for step in range(3):
        a.add(batch(range(100 + 3 * step, 103 + 3 * step)))
        b.add(batch(range(100 + 3 * step, 103 + 3 * step)))
        torch.testing.assert_close(a.sample(32), b.sample(32))
    assert stored_ids(a) == stored_ids(b)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda s: s.update(capacity=9), r"saved capacity=9 but this buffer has 8"),
        (lambda s: s.update(obs_shape=[3]), r"saved obs_shape=\[3\]"),
        (lambda s: s.update(obs_dtype="<f8"), r"saved obs_dtype='<f8'"),
        (lambda s: s.update(size=9), r"size=9 is outside \[0, 8\]"),
        (lambda s: s.update(pos=2), r"pos=2 must equal size=3"),
        (lambda s: s["data"].update(reward=np.zeros(2, np.float32)), r"data\['reward'\] is float32\[2\], expected float32\[3\]"),
        (lambda s: s["data"].pop("terminated"), r"'data' must hold exactly"),
        (lambda s: s.update(rng={"bit_generator": "nope"}), r"bad 'rng' state"),
        (lambda s: s.pop("rng"), r"expected keys"),
    ],
)
def test_bad_state_is_refused_and_buffer_kept(change, match):
    source = ReplayBuffer(8, (2,), (1,), seed=1)
    source.add(batch([1, 2, 3]))
    state = source.state_dict()
    change(state)
    target = ReplayBuffer(8, (2,), (1,), seed=1)
    target.add(batch([50, 51]))
    with pytest.raises(ValueError, match=match):
        target.load_state_dict(state)
    assert stored_ids(target) == [50, 51] and len(target) == 2


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(1, 12),
    sizes=st.lists(st.integers(0, 30), min_size=1, max_size=8),
    lead_2d=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_ring_buffer_matches_naive_list(capacity, sizes, lead_2d):
    buffer = ReplayBuffer(capacity, (2,), (1,), seed=0)
    naive = []
    next_id = 0
    for size, two_d in zip(sizes, lead_2d):
        ids = list(range(next_id, next_id + size))
        next_id += size
        lead = (size // 2, 2) if two_d and size % 2 == 0 else None
        assert buffer.add(batch(ids, lead=lead)) == size
        naive = (naive + ids)[-capacity:]
        assert len(buffer) == len(naive)
        assert stored_ids(buffer) == naive
        if naive:
            assert set(buffer.sample(20)["obs"][:, 0].tolist()) <= set(naive)


# --------------------------------------------------------------------------------------- rollout
def test_rollout_tensors_from_a_real_collect():
    class Recorder:
        def _forward_collect(self, obs, envstep):
            n = obs.shape[0]
            return {"action": np.full(n, envstep % 2, np.int64), "log_prob": np.full(n, -0.7, np.float64),
                    "value": obs[:, 0].astype(np.float32)}

    env = make_vector_env("CartPole-v1", 3)
    try:
        result = Collector(env, Recorder(), seed=2).collect(5)
    finally:
        env.close()
    data = rollout_to_tensors(result)
    assert set(data) == {"obs", "action", "reward", "next_obs", "terminated", "truncated", "log_prob", "value"}
    assert data["obs"].shape == (5, 3, 4) and data["obs"].dtype == torch.float32
    assert data["action"].shape == (5, 3) and data["action"].dtype == torch.int64
    assert data["log_prob"].dtype == torch.float32 and data["terminated"].dtype == torch.float32
    for key, array in result.transitions.items():
        np.testing.assert_array_equal(data[key].numpy(), array.astype(data[key].numpy().dtype), err_msg=key)
    flat = flatten_rollout(data)
    assert flat["obs"].shape == (15, 4) and flat["reward"].shape == (15,)
    torch.testing.assert_close(flat["obs"][3:6], data["obs"][1])  # step-major
    assert rollout_to_tensors(result.transitions, device="cpu")["obs"].device.type == "cpu"


def test_rollout_errors_name_the_key():
    good = {k: np.zeros((4, 2), np.float32) for k in ("obs", "action", "reward", "next_obs", "terminated", "truncated")}
    with pytest.raises(KeyError, match=r"lacks \['truncated'\]"):
        rollout_to_tensors({k: v for k, v in good.items() if k != "truncated"})
    with pytest.raises(ValueError, match=r"'value' has shape \(3, 2\), expected leading dims \(4, 2\)"):
        rollout_to_tensors({**good, "value": np.zeros((3, 2))})
    with pytest.raises(ValueError, match=r"'reward' has shape \(8,\), expected \[T, N\]"):
        rollout_to_tensors({**good, "reward": np.zeros(8)})
    with pytest.raises(TypeError, match=r"'note' has unsupported dtype"):
        rollout_to_tensors({**good, "note": np.full((4, 2), "x")})
    with pytest.raises(TypeError, match="expects a CollectResult or a dict"):
        rollout_to_tensors([1, 2])


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_ppg_learns_from_a_collected_rollout(env_id):
    """The on-policy data contract end to end: collector -> rollout_to_tensors -> PPGPolicy._forward_learn."""
    from policies.ppg import PPGPolicy

    env = make_vector_env(env_id, 2, seed=0)
    try:
        policy = PPGPolicy(dict(hidden_sizes=[16], rollout_steps=8, minibatch_size=8, e_policy=1, e_value=1, n_pi=2),
                           env.single_observation_space, env.single_action_space, seed=0)
        result = Collector(env, policy, seed=0).collect(8)
        info = policy._forward_learn(rollout_to_tensors(result))
    finally:
        env.close()
    assert "env_action" not in result.transitions and {"log_prob", "value"} <= set(result.transitions)
    assert {"policy_loss", "value_loss"} <= set(info)
    assert all(np.isfinite(float(v)) for v in info.values())


def test_td3_learns_from_replay_samples_of_a_truncating_env():
    """The off-policy data contract end to end: collector -> ReplayBuffer -> TD3Policy._forward_learn.
    Pendulum episodes are cut at 5 steps: truncated, so ``terminated`` stays 0 in every sampled batch."""
    from policies.td3 import TD3Policy

    env = make_vector_env("Pendulum-v1", 2, seed=0, env_kwargs={"max_episode_steps": 5})
    try:
        policy = TD3Policy(dict(hidden_sizes=[16], learning_starts=10, batch_size=32),
                           env.single_observation_space, env.single_action_space, seed=0)
        collector = Collector(env, policy, seed=0)
        buffer = ReplayBuffer(100, env.single_observation_space.shape, env.single_action_space.shape, seed=0)
        result = collector.collect(12)
        buffer.add(result.transitions)
        infos = [policy._forward_learn(buffer.sample(32)) for _ in range(2)]
    finally:
        env.close()
    assert len(buffer) == 24 and result.transitions["truncated"].sum() == 4
    assert buffer.state_dict()["data"]["terminated"].sum() == 0
    assert "actor_loss" in infos[1] or "actor_loss" in infos[0]
    assert all(np.isfinite(float(v)) for info in infos for v in info.values())


# -------------------------------------------------------------------------------------------- prefetch
def _twins(seed=3, n=40, capacity=64):
    a, b = ReplayBuffer(capacity, (2,), (1,), seed=seed), ReplayBuffer(capacity, (2,), (1,), seed=seed)
    a.add(batch(range(n)))
    b.add(batch(range(n)))
    return a, b


@pytest.mark.parametrize("batch_size, n_batches, chunk_bytes", [(8, 10, None), (3, 7, None), (5, 9, 400), (1, 4, 1)])
def test_prefetched_batches_equal_batch_by_batch_sampling(batch_size, n_batches, chunk_bytes, monkeypatch):
    """prefetch(B, n) then n samples give exactly the batches (and the generator state after each) of n plain
    samples, also when the batches are drawn in several chunks."""
    from rlearn.buffer import draws

    if chunk_bytes is not None:
        monkeypatch.setattr(draws, "PREFETCH_BYTES", chunk_bytes)
    fast, plain = _twins()
    fast.sample(1)  # leave a 32-bit half in the generator's state
    plain.sample(1)
    fast.prefetch(batch_size, n_batches)
    for _ in range(n_batches):
        torch.testing.assert_close(fast.sample(batch_size), plain.sample(batch_size), rtol=0, atol=0)
        assert fast.state_dict()["rng"] == plain.state_dict()["rng"]
    torch.testing.assert_close(fast.sample(batch_size), plain.sample(batch_size), rtol=0, atol=0)  # plan over


@pytest.mark.parametrize("interrupt", ["add", "other_size", "load", "state_dict"])
def test_prefetch_interrupted_continues_as_plain_sampling(interrupt):
    fast, plain = _twins()
    fast.prefetch(6, 10)
    for _ in range(3):
        torch.testing.assert_close(fast.sample(6), plain.sample(6), rtol=0, atol=0)
    if interrupt == "add":
        fast.add(batch([100, 101]))
        plain.add(batch([100, 101]))
    elif interrupt == "other_size":
        torch.testing.assert_close(fast.sample(4), plain.sample(4), rtol=0, atol=0)
    elif interrupt == "load":  # a resumed buffer: from a state taken between two prefetched batches
        state = _torch_round_trip(fast.state_dict())
        fast = ReplayBuffer(64, (2,), (1,), seed=999)
        fast.load_state_dict(state)
    for _ in range(8):
        torch.testing.assert_close(fast.sample(6), plain.sample(6), rtol=0, atol=0)
    assert fast.state_dict()["rng"] == plain.state_dict()["rng"]


def test_prefetch_ignores_what_it_cannot_speed_up():
    buffer = ReplayBuffer(8, (2,), (1,), seed=0)
    buffer.prefetch(4, 5)  # empty buffer: nothing to draw
    buffer.add(batch([7]))
    buffer.prefetch(4, 5)  # one transition: numpy draws nothing either
    assert buffer.sample(4)["obs"][:, 0].tolist() == [7.0] * 4
    for bad, match in (((0, 3), "batch_size"), ((4, -1), "n_batches"), ((4, 2.0), "n_batches")):
        with pytest.raises(ValueError, match=match):
            buffer.prefetch(*bad)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(2, 5000), batch_size=st.integers(1, 70), n=st.integers(2, 12), seed=st.integers(0, 2**32),
       pre=st.integers(0, 3))
def test_draw_batches_matches_integers_call_by_call(size, batch_size, n, seed, pre):
    from rlearn.buffer import draws

    reference, mine = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(pre):  # leave a half (or not) in the state
        reference.integers(0, 3, size=1)
        mine.integers(0, 3, size=1)
    expected, states = [], []
    for _ in range(n):
        expected.append(reference.integers(0, size, size=batch_size))
        states.append(reference.bit_generator.state)
    drawn = draws.draw_batches(mine, size, batch_size, n)
    np.testing.assert_array_equal(drawn.values, np.stack(expected))
    assert [drawn.state_after(k + 1) for k in range(n)] == states
    assert mine.bit_generator.state == states[-1]
