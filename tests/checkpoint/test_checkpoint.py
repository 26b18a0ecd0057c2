"""Checkpoint format, atomic writes, validation, CheckpointHook, and resume continuity (counters,
monitor windows, RNG, TensorBoard points read back with TensorBoard's own reader)."""

from __future__ import annotations

import collections
import io
import logging
import os
import random
import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from policies.base import Policy
from rlearn.hooks import CheckpointHook, LogShowHook
from rlearn.checkpoint import CheckpointError
from rlearn.learner import BaseLearner
from rlearn.checkpoint import files as ckpt
from rlearn.writers.tb_events import TBWriter, event_files, read_records, rewind_event_files


# ------------------------------------------------------------------------------------------ policies
class NoisyPolicy(Policy):
    """Reports ``loss`` (from the policy's own parameters and torch's global RNG) every iteration and
    ``aux`` (numpy's global RNG + Python's ``random``) every 5: resumed values equal an uninterrupted
    run only if parameters, optimizer, extra state and every RNG are restored."""

    def _init_learn(self):
        with torch.random.fork_rng():  # same initial weights everywhere, global RNG untouched
            torch.manual_seed(0)
            self.net = torch.nn.Linear(3, 2)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=0.01)
        self.n = 0

    def _forward_learn(self, data):
        self.n += 1
        noise = torch.rand(4, 3)
        loss = (self.net(data + noise) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        info = {"loss": loss.detach()}
        if self.n % 5 == 0:
            info["aux"] = float(np.random.rand()) + random.random()
        return info

    def _monitor_vars_learn(self):
        return ["loss", "aux"]

    def _forward_collect(self, obs, envstep):
        return {"action": np.zeros(len(obs))}

    def _forward_eval(self, obs):
        return np.zeros(len(obs))

    def modules(self):
        return {"net": self.net}

    def optimizers(self):
        return {"opt": self.opt}

    def extra_state(self):
        return {"n": self.n}

    def load_extra_state(self, state):
        self.n = state["n"]


def _wider_init_learn(self):
    NoisyPolicy._init_learn(self)
    self.net = torch.nn.Linear(3, 5)
    self.opt = torch.optim.Adam(self.net.parameters(), lr=0.01)


# same class name as NoisyPolicy (a changed network size in the same policy), other shapes
WiderPolicy = type("NoisyPolicy", (NoisyPolicy,), {"_init_learn": _wider_init_learn})


class OtherPolicy(NoisyPolicy):
    pass


class Counter:
    """A registered state holding numpy arrays and a deque (what buffers and collectors hold)."""

    def __init__(self):
        self.values = np.zeros(4, dtype=np.float32)
        self.recent = collections.deque(maxlen=3)

    def state_dict(self):
        return {"values": self.values, "recent": self.recent, "seed": np.int64(7)}

    def load_state_dict(self, state):
        self.values = state["values"]
        self.recent = state["recent"]
        assert state["seed"] == 7


class Opaque:
    """A registered state whose state_dict holds an arbitrary object: refused at save time."""

    def state_dict(self):
        return {"handle": object()}

    def load_state_dict(self, state):
        pass


DATA = torch.ones(4, 3)


def make_learner(tmp_path, policy_cls=NoisyPolicy, log_freq=5, window=15, seed=0, **kwargs):
    policy = policy_cls(None, None, None, seed=seed)
    logger = logging.getLogger("rlearn.test.checkpoint")
    learner = BaseLearner(policy, dict(log_freq=log_freq, monitor_window=window), work_dir=tmp_path, logger=logger, **kwargs)
    return learner


def run(learner, start, stop, envstep_per_iter=8):
    for i in range(start, stop):
        learner.train(DATA, envstep=(i + 1) * envstep_per_iter)


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ----------------------------------------------------------------------------------------- encoding
def test_encode_decode_round_trip_of_common_state_types():
    state = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "u8": np.arange(5, dtype=np.uint8),
        "bool": np.array([True, False]),
        "strings": np.array(["ab", "cde"]),
        "scalar": np.float64(2.5),
        "int_scalar": np.int32(-3),
        "deque": collections.deque([1, 2.0, np.int64(3)], maxlen=4),
        "ordered": collections.OrderedDict(b=1, a=(1, "x", None)),
        "tensor": torch.arange(3),
        "set": {1, 2},
        "big": 2**100,
        "noncontiguous": np.arange(12).reshape(3, 4)[:, ::2],
    }
    data = ckpt.serialize_checkpoint(state)
    raw = torch.load(io.BytesIO(data), weights_only=True)  # loads without unpickling any class
    back = ckpt.decode_state(raw)
    for key in ("f32", "u8", "bool", "strings", "noncontiguous"):
        assert back[key].dtype == state[key].dtype and np.array_equal(back[key], state[key])
    assert back["scalar"] == 2.5 and back["scalar"].dtype == np.float64
    assert back["int_scalar"] == -3 and back["int_scalar"].dtype == np.int32
    assert back["deque"] == collections.deque([1, 2.0, 3]) and back["deque"].maxlen == 4
    assert isinstance(back["ordered"], collections.OrderedDict) and list(back["ordered"]) == ["b", "a"]
    assert back["ordered"]["a"] == (1, "x", None)
    assert torch.equal(back["tensor"], state["tensor"])
    assert back["set"] == {1, 2} and back["big"] == 2**100


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64, np.int8, np.int64, np.uint16, np.bool_, np.complex64]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
    )
)
def test_numpy_arrays_round_trip_exactly(array):
    back = ckpt.decode_state(torch.load(io.BytesIO(ckpt.serialize_checkpoint({"a": array})), weights_only=True))["a"]
    assert back.dtype == array.dtype and back.shape == array.shape
    assert array.tobytes() == back.tobytes()  # bit-exact, NaN payloads included


def test_unstorable_object_is_refused_with_its_path():
    with pytest.raises(CheckpointError, match=r"checkpoint\.states\.buffer\.handle: cannot store an object of type builtins\.object"):
        ckpt.serialize_checkpoint({"states": {"buffer": {"handle": object()}}})
    with pytest.raises(CheckpointError, match="dtype object"):
        ckpt.serialize_checkpoint({"x": np.array([None, 1], dtype=object)})


# ------------------------------------------------------------------------------------ atomic writes
def test_atomic_write_keeps_old_file_when_rename_fails(tmp_path, monkeypatch):
    target = tmp_path / "latest.pt"
    ckpt.atomic_write_bytes(target, b"good")

    def crash(src, dst):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(ckpt.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        ckpt.atomic_write_bytes(target, b"new content")
    assert target.read_bytes() == b"good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]  # no temporary file left


def test_atomic_write_keeps_old_file_when_write_dies_halfway(tmp_path, monkeypatch):
    target = tmp_path / "latest.pt"
    ckpt.atomic_write_bytes(target, b"good")
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            self.handle.write(data[: len(data) // 2])
            raise OSError("No space left on device")

    monkeypatch.setattr(ckpt.os, "fdopen", lambda fd, mode: HalfWriter(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match="No space left"):
        ckpt.atomic_write_bytes(target, b"x" * 1000)
    assert target.read_bytes() == b"good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]


# ----------------------------------------------------------------------------------- reading errors
@pytest.fixture
def saved(tmp_path):
    learner = make_learner(tmp_path / "run")
    run(learner, 0, 3)
    return learner.save_checkpoint()


def test_read_errors_name_the_file_and_the_problem(tmp_path, saved):
    with pytest.raises(CheckpointError, match=f"checkpoint {tmp_path / 'nope.pt'}: no such file"):
        ckpt.read_checkpoint(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="not a regular file"):
        ckpt.read_checkpoint(tmp_path)

    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"empty\.pt: not a PyTorch checkpoint .*it is empty"):
        ckpt.read_checkpoint(empty)

    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(os.urandom(64) + b"\x00" * 100)
    with pytest.raises(CheckpointError, match=r"garbage\.pt: not a PyTorch checkpoint"):
        ckpt.read_checkpoint(garbage)

    data = saved.read_bytes()
    for cut in (len(data) // 2, len(data) - 10):
        truncated = tmp_path / f"truncated_{cut}.pt"
        truncated.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=rf"truncated_{cut}\.pt: truncated or corrupt"):
            ckpt.read_checkpoint(truncated)

    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.ones(1)}}, foreign)
    with pytest.raises(CheckpointError, match=r"foreign\.pt: a torch file but not an rlearn checkpoint"):
        ckpt.read_checkpoint(foreign)

    pickled = tmp_path / "pickled.pt"
    torch.save({"obj": Counter()}, pickled)
    with pytest.raises(CheckpointError, match=r"pickled\.pt: contains objects other than tensors .* refusing to unpickle"):
        ckpt.read_checkpoint(pickled)

    raw = torch.load(saved, weights_only=True)
    newer = tmp_path / "newer.pt"
    torch.save({**raw, "format_version": ckpt.FORMAT_VERSION + 1}, newer)
    with pytest.raises(CheckpointError, match=r"newer\.pt: format version 2 is not supported"):
        ckpt.read_checkpoint(newer)

    partial = tmp_path / "partial.pt"
    torch.save({k: v for k, v in raw.items() if k not in ("rng", "policy")}, partial)
    with pytest.raises(CheckpointError, match=r"partial\.pt: missing section\(s\) policy, rng"):
        ckpt.read_checkpoint(partial)


def test_load_checks_policy_class_shapes_and_states_before_changing_anything(tmp_path, saved):
    other = make_learner(tmp_path / "b", policy_cls=OtherPolicy)
    with pytest.raises(CheckpointError, match=f"checkpoint {saved}: written by policy NoisyPolicy, but this learner runs OtherPolicy"):
        other.load_checkpoint(saved)

    wider = make_learner(tmp_path / "c", policy_cls=WiderPolicy)
    with pytest.raises(CheckpointError, match=r"does not fit policy NoisyPolicy: net\.bias has shape \(2,\) in the checkpoint, \(5,\) in the policy; net\.weight has shape \(2, 3\) in the checkpoint, \(5, 3\) in the policy"):
        wider.load_checkpoint(saved)

    with_state = make_learner(tmp_path / "d")
    with_state.register_state("buffer", Counter())
    before = {k: v.clone() for k, v in with_state.policy.net.state_dict().items()}
    with pytest.raises(CheckpointError, match=r"no state for registered object\(s\) 'buffer'"):
        with_state.load_checkpoint(saved)
    # nothing was restored by the failed loads
    assert with_state.train_iter == 0 and with_state.envstep == 0
    assert all(torch.equal(before[k], v) for k, v in with_state.policy.net.state_dict().items())


def test_round_trip_restores_everything(tmp_path):
    learner = make_learner(tmp_path / "a")
    counter = Counter()
    learner.register_state("buffer", counter)
    learner.run_config = {"exp_name": "demo", "seed": 3}
    run(learner, 0, 7)
    counter.values[:] = [1, 2, 3, 4]
    counter.recent.extend([5, 6, 7, 8])
    seed_all(123)
    path = learner.save_checkpoint()
    assert path == tmp_path / "a" / "ckpt" / "iteration_7.pt"
    expected_rng = (random.random(), float(np.random.rand()), torch.rand(1).item())

    fresh = make_learner(tmp_path / "b")
    fresh_counter = Counter()
    fresh.register_state("buffer", fresh_counter)
    seed_all(999)
    loaded = fresh.load_checkpoint(path)
    assert loaded["config"] == {"exp_name": "demo", "seed": 3}
    assert loaded["policy_class"] == "NoisyPolicy" and loaded["rlearn_version"]
    assert (fresh.train_iter, fresh.envstep) == (7, 56)
    assert fresh.message_hub.get_info("train_iter") == 7 and fresh.message_hub.get_info("envstep") == 56
    assert (random.random(), float(np.random.rand()), torch.rand(1).item()) == expected_rng
    for key, value in learner.policy.net.state_dict().items():
        assert torch.equal(value, fresh.policy.net.state_dict()[key])
    assert fresh.policy.n == 7
    saved_opt, fresh_opt = learner.policy.opt.state_dict(), fresh.policy.opt.state_dict()
    for index, state in saved_opt["state"].items():
        assert torch.equal(state["exp_avg"], fresh_opt["state"][index]["exp_avg"])
    assert np.array_equal(fresh_counter.values, [1, 2, 3, 4]) and fresh_counter.values.dtype == np.float32
    assert list(fresh_counter.recent) == [6, 7, 8] and fresh_counter.recent.maxlen == 3
    for key in ("loss", "aux"):
        assert fresh.monitor.avg(key) == learner.monitor.avg(key)
        assert fresh.monitor.count(key) == learner.monitor.count(key)
    assert fresh.monitor.tick_count == learner.monitor.tick_count == 7


# -------------------------------------------------------------------------------------- the hook
def test_checkpoint_hook_saves_prunes_and_writes_latest(tmp_path):
    learner = make_learner(tmp_path)
    hook = CheckpointHook(freq=4, keep=2)
    learner.register_hook(hook, "LOW")
    learner.call_hook("before_run")
    run(learner, 0, 13)
    learner.call_hook("after_run")
    names = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert names == ["iteration_12.pt", "iteration_13.pt", "latest.pt"]
    assert ckpt.read_checkpoint(tmp_path / "ckpt" / "latest.pt")["train_iter"] == 13
    assert ckpt.read_checkpoint(tmp_path / "ckpt" / "iteration_12.pt")["train_iter"] == 12
    assert (tmp_path / "ckpt" / "latest.pt").read_bytes() == (tmp_path / "ckpt" / "iteration_13.pt").read_bytes()
    learner.call_hook("after_run")  # already saved at this iteration: no second save
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == names


def test_bad_hook_arguments():
    for kwargs in (dict(freq=0), dict(freq=1.5), dict(keep=0), dict(keep=True), dict(dirname="")):
        with pytest.raises(ValueError):
            CheckpointHook(**kwargs)


def test_failed_save_leaves_latest_intact(tmp_path, monkeypatch):
    learner = make_learner(tmp_path)
    learner.register_hook(CheckpointHook(freq=5), "LOW")
    run(learner, 0, 5)
    latest = tmp_path / "ckpt" / "latest.pt"
    good = latest.read_bytes()

    # 1. a state that cannot be stored: refused before any file is touched
    learner.register_state("opaque", Opaque())
    with pytest.raises(CheckpointError, match=r"checkpoint\.states\.opaque\.handle"):
        run(learner, 5, 10)
    assert latest.read_bytes() == good and not (tmp_path / "ckpt" / "iteration_10.pt").exists()
    learner._states.pop("opaque")

    # 2. the process dies while writing latest.pt (after iteration_15.pt was written)
    real_replace = os.replace

    def dying_replace(src, dst):
        if str(dst).endswith("latest.pt"):
            raise KeyboardInterrupt("killed while saving")
        return real_replace(src, dst)

    monkeypatch.setattr(ckpt.os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        run(learner, 10, 15)
    monkeypatch.setattr(ckpt.os, "replace", real_replace)
    assert latest.read_bytes() == good
    assert ckpt.read_checkpoint(latest)["train_iter"] == 5
    assert ckpt.read_checkpoint(tmp_path / "ckpt" / "iteration_15.pt")["train_iter"] == 15
    assert not [p for p in (tmp_path / "ckpt").iterdir() if p.name.endswith(".tmp")]


def test_prune_keeps_newest_by_number(tmp_path):
    for n in (1, 2, 10, 100):
        (tmp_path / f"iteration_{n}.pt").write_bytes(b"x")
    (tmp_path / "latest.pt").write_bytes(b"x")
    (tmp_path / "iteration_x.pt").write_bytes(b"x")
    removed = ckpt.prune_checkpoints(tmp_path, keep=2)
    assert sorted(p.name for p in removed) == ["iteration_1.pt", "iteration_2.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iteration_10.pt", "iteration_100.pt", "iteration_x.pt", "latest.pt"]
    assert ckpt.prune_checkpoints(tmp_path, keep=None) == []


# ----------------------------------------------------------------------------- TensorBoard rewind
def scalars(logdir):
    """{tag: [(step, value), ...]} in file order, without TensorBoard's orphan purging (which would hide
    duplicate points)."""
    acc = EventAccumulator(str(logdir), purge_orphaned_data=False, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_rewind_uses_point_counts_when_envstep_did_not_move(tmp_path):
    points = {}
    writer = TBWriter(tmp_path, points=points)
    for it, env in [(1, 10), (2, 20), (3, 20)]:
        writer.add_scalar("learner_iter/x_avg", it, it)
        writer.add_scalar("learner_step/x_avg", it, env)
    writer.flush()
    snapshot = {k: list(v) for k, v in points.items()}  # what a checkpoint at iteration 2 holds...
    snapshot["learner_step/x_avg"] = [20, 1]
    snapshot["learner_iter/x_avg"] = [2, 1]
    writer.add_scalar("late/y", 1.0, 1)  # untracked tag: axis rule (iteration axis, step 1 <= 2 kept)
    writer.add_scalar("late_step/y", 1.0, 30)  # untracked, env-step axis, 30 > 20: dropped
    writer.close()
    report = rewind_event_files(tmp_path, train_iter=2, envstep=20, points=snapshot)
    assert report.points_removed == 3
    got = scalars(tmp_path)
    assert got["learner_iter/x_avg"] == [(1, 1.0), (2, 2.0)]
    assert got["learner_step/x_avg"] == [(10, 1.0), (20, 2.0)]  # the second point at envstep 20 is gone
    assert got["late/y"] == [(1, 1.0)]
    assert "late_step/y" not in got
    assert rewind_event_files(tmp_path, 2, 20, snapshot).files_rewritten == []  # idempotent, no rewrite


def test_rewind_drops_a_half_written_record_and_skips_the_open_file(tmp_path):
    writer = TBWriter(tmp_path)
    writer.add_scalar("learner_iter/x_avg", 1.0, 1)
    writer.close()
    (old,) = event_files(tmp_path)
    with open(old, "ab") as handle:  # a crash in the middle of a record
        handle.write(struct.pack("<Q", 50) + b"\x01\x02")
    assert read_records(old).damaged_tail == "truncated record header at byte %d" % (old.stat().st_size - 10)
    current = TBWriter(tmp_path)
    current.add_scalar("learner_iter/x_avg", 9.0, 9)
    current.flush()
    report = rewind_event_files(tmp_path, train_iter=5, envstep=0, skip=(current.event_file,))
    assert report.files_rewritten == [old] and old in report.damaged_tails
    assert read_records(old).damaged_tail is None
    assert scalars(tmp_path)["learner_iter/x_avg"] == [(1, 1.0), (9, 9.0)]
    current.close()


# ------------------------------------------------------------------------------------------ resume
def build(work_dir, window=15):
    learner = make_learner(work_dir, log_freq=5, window=window)
    learner.register_hook(LogShowHook(), "BELOW_NORMAL")
    learner.register_hook(CheckpointHook(freq=10), "LOW")
    return learner


def test_resume_continues_counters_windows_rng_and_tensorboard(tmp_path):
    # uninterrupted reference run
    seed_all(0)
    reference = build(tmp_path / "ref")
    reference.call_hook("before_run")
    run(reference, 0, 40)
    reference.call_hook("after_run")

    # the same run, "killed" after iteration 25: events up to 25 are on disk, checkpoints at 10 and 20
    seed_all(0)
    crashed = build(tmp_path / "run")
    crashed.call_hook("before_run")
    run(crashed, 0, 25)
    # no after_run: the process died; every log was flushed when written
    crashed_points = scalars(tmp_path / "run" / "tb")
    assert [s for s, _ in crashed_points["learner_iter/loss_avg"]] == [5, 10, 15, 20, 25]

    seed_all(12345)  # the resumed process starts with other RNG states: the checkpoint restores them
    resumed = build(tmp_path / "run")
    resumed.load_checkpoint(tmp_path / "run" / "ckpt" / "iteration_20.pt")
    assert (resumed.train_iter, resumed.envstep) == (20, 160)
    resumed.call_hook("before_run")
    run(resumed, 20, 40)
    resumed.call_hook("after_run")
    assert (resumed.train_iter, resumed.envstep) == (40, 320)
    assert resumed.policy.n == 40
    assert resumed.get_hook("LogShowHook").logs == 8  # the hook's state continued too (4 logs + 4)

    got, want = scalars(tmp_path / "run" / "tb"), scalars(tmp_path / "ref" / "tb")
    assert set(got) == set(want)
    for tag, points in want.items():
        steps = [s for s, _ in got[tag]]
        assert steps == sorted(set(steps)), f"{tag}: duplicate or out-of-order steps {steps}"
        assert steps == [s for s, _ in points], tag
        if not tag.startswith(("throughput", "time_")):  # wall-clock measurements
            assert got[tag] == points, tag  # values identical: windows, RNG, optimizer all continued
    assert [s for s, _ in got["learner_iter/loss_avg"]] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert [s for s, _ in got["learner_step/loss_avg"]] == [40, 80, 120, 160, 200, 240, 280, 320]
    assert [s for s, _ in got["learner_iter/aux_avg"]] == [5, 10, 15, 20, 25, 30, 35, 40]
    # the window of 15 at iteration 30 spans 16..30: its first values came from the checkpoint
    assert resumed.monitor.avg("loss") == reference.monitor.avg("loss")


def test_checkpoint_mount_points_and_window_change_warning(tmp_path, caplog):
    from rlearn.hooks import Hook

    class Extra(Hook):
        def __init__(self):
            self.loaded = None

        def before_save_checkpoint(self, learner, checkpoint):
            checkpoint["extra"] = {"note": np.arange(3)}

        def after_load_checkpoint(self, learner, checkpoint):
            self.loaded = (learner.train_iter, checkpoint["extra"]["note"].tolist())

    learner = make_learner(tmp_path / "a", window=15)
    learner.register_hook(Extra())
    run(learner, 0, 3)
    path = learner.save_checkpoint()

    other = make_learner(tmp_path / "b", window=5)
    hook = Extra()
    other.register_hook(hook)
    with caplog.at_level(logging.WARNING, logger="rlearn.test.checkpoint"):
        other.load_checkpoint(path, rewind_tensorboard=False)
    assert hook.loaded == (3, [0, 1, 2])
    assert other.monitor.window_size("loss") == 15
    warnings = [r.getMessage() for r in caplog.records if "monitor windows differ" in r.getMessage()]
    assert len(warnings) == 1 and "loss: 15 (config 5)" in warnings[0]


def _with_raw(saved, path, change):
    """``saved`` rewritten to ``path`` after ``change(raw)`` on its stored (encoded) form, with a valid digest."""
    from rlearn.checkpoint.integrity import append_digest

    raw = torch.load(saved, weights_only=True)
    change(raw)
    buffer = io.BytesIO()
    torch.save(raw, buffer)
    append_digest(buffer)
    path.write_bytes(buffer.getvalue())
    return path


@pytest.mark.parametrize("entry, message", [
    ({"shape": (10**10, 3)}, r"states\.buffer\.obs: an array of shape \(10000000000, 3\) needs 30000000000 values, "
                             r"the checkpoint holds 6"),
    ({"shape": (2, -3)}, r"states\.buffer\.obs: array shape must be a list of ints >= 0, got \(2, -3\)"),
    ({"shape": "2x3"}, r"states\.buffer\.obs: array shape must be a list of ints >= 0, got '2x3'"),
    ({"dtype": "<no"}, r"states\.buffer\.obs: array dtype '<no' is not a numpy dtype"),
    ({"data": "abc"}, r"states\.buffer\.obs: array data must be a tensor or bytes, got str"),
])
def test_a_stored_array_that_contradicts_itself_is_a_checkpoint_error_naming_it(tmp_path, saved, entry, message):
    """A digest-valid file whose array entry claims another shape used to raise ValueError from numpy."""
    learner = make_learner(tmp_path / "b")
    learner.register_state("buffer", ArrayState())

    def claim(raw):
        raw["states"]["buffer"]["obs"].update(entry)

    path = _with_raw(learner.save_checkpoint(), tmp_path / "crafted.pt", claim)
    with pytest.raises(CheckpointError, match=rf"^checkpoint {path}: {message}$"):
        ckpt.read_checkpoint(path)
    # what a reader of the policy alone needs is still there
    policy_only = ckpt.read_checkpoint(path, sections=("policy",))
    assert set(policy_only) == {"policy", "format", "format_version", "train_iter", "envstep"}
    assert torch.equal(policy_only["policy"]["modules"]["net"]["weight"], learner.policy.net.weight)


class ArrayState:
    """A registered state holding a numpy array (as a replay buffer does)."""

    def state_dict(self):
        return {"obs": np.arange(6, dtype=np.float32).reshape(2, 3)}

    def load_state_dict(self, state):
        self.obs = state["obs"]
