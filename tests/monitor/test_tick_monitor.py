"""TickMonitor: exact numbers for the irregular-metric cases, scalar handling, state, and a property test
against a naive reference that keeps every (tick, value) pair."""

from __future__ import annotations

import io
import math
from fractions import Fraction
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlearn.monitor import TickMonitor
from rlearn.monitor import scalars


def run(monitor: TickMonitor, stream: List[Dict[str, float]]) -> None:
    """One update + tick per element of ``stream``."""
    for info in stream:
        monitor.update(info)
        monitor.tick()


# ------------------------------------------------------------------------------------- exact numbers
def test_periodic_key_is_averaged_over_the_values_it_has():
    """DESIGN.md: window 20, a key every 10 ticks -> 2 values; a key every tick -> 20 values."""
    monitor = TickMonitor(window_size=20)
    seen = {}
    for it in range(40):
        info = {"loss": float(it)}
        if it % 10 == 0:
            info["aux_loss"] = float(it)
        monitor.update(info)
        if it == 39:  # log time, before the tick: the window is ticks 20..39
            seen = {k: (monitor.count(k), monitor.avg(k), monitor.min(k), monitor.max(k)) for k in ("loss", "aux_loss")}
        monitor.tick()
    assert seen["loss"] == (20, sum(range(20, 40)) / 20, 20.0, 39.0)
    assert seen["aux_loss"] == (2, 25.0, 20.0, 30.0)


def test_absent_key_is_none_never_zero():
    monitor = TickMonitor(window_size=5)
    run(monitor, [{"a": 3.0}] + [{}] * 4)
    assert monitor.tick_count == 5
    # tick 0 left the window (ticks 1..5)
    assert monitor.avg("a") is None and monitor.min("a") is None and monitor.max("a") is None
    assert monitor.sum("a") is None
    assert monitor.count("a") == 0 and monitor.nonfinite("a") == 0
    assert monitor.last("a") == 3.0  # the last value is kept forever
    # a key never recorded
    assert monitor.avg("never") is None and monitor.count("never") == 0 and monitor.last("never") is None


def test_di_engine_pitfall_window_shorter_than_the_period():
    """DI-engine: a window shorter than a key's period shows 0 in DI-engine; rlearn shows nothing (None)."""
    monitor = TickMonitor(window_size=5)
    logged = []
    for it in range(40):
        monitor.update({"aux_value_loss": float(it)} if it % 10 == 0 else {"approx_kl": 0.5})
        if (it + 1) % 5 == 0:  # log every 5 iterations
            logged.append(monitor.avg("aux_value_loss"))
        monitor.tick()
    assert logged == [0.0, None, 10.0, None, 20.0, None, 30.0, None]


def test_current_tick_is_included_and_several_values_per_tick_count():
    monitor = TickMonitor(window_size=2)
    monitor.update({"x": 1.0})
    monitor.update({"x": 3.0})
    assert (monitor.count("x"), monitor.avg("x")) == (2, 2.0)
    monitor.tick()
    monitor.update({"x": 8.0})
    assert (monitor.count("x"), monitor.avg("x"), monitor.min("x"), monitor.max("x")) == (3, 4.0, 1.0, 8.0)
    monitor.tick()  # window: ticks 1..2 -> only 8.0
    assert (monitor.count("x"), monitor.avg("x"), monitor.last("x")) == (1, 8.0, 8.0)


def test_nonfinite_values_are_counted_not_averaged():
    monitor = TickMonitor(window_size=3)
    monitor.update({"loss": 1.0})
    monitor.tick()
    monitor.update({"loss": float("nan")})
    monitor.update({"loss": float("inf")})
    monitor.tick()
    monitor.update({"loss": 3.0})
    assert monitor.avg("loss") == 2.0 and monitor.count("loss") == 2
    assert monitor.min("loss") == 1.0 and monitor.max("loss") == 3.0
    assert monitor.nonfinite("loss") == 2 and monitor.nonfinite_total("loss") == 2
    monitor.update({"loss": -math.inf})
    assert math.isinf(monitor.last("loss"))
    run(monitor, [{}] * 3)
    assert monitor.nonfinite("loss") == 0 and monitor.nonfinite_total("loss") == 3
    # a key with only NaN: counted, no average
    monitor.update({"bad": float("nan")})
    assert monitor.avg("bad") is None and monitor.nonfinite("bad") == 1 and math.isnan(monitor.last("bad"))


def test_keys_in_first_seen_order():
    monitor = TickMonitor()
    monitor.update({"b": 1, "a": 2})
    monitor.tick()
    monitor.update({"c": 1, "a": 3})
    assert monitor.keys() == ["b", "a", "c"]
    assert "a" in monitor and "z" not in monitor


def test_per_key_window_sizes():
    monitor = TickMonitor(window_size=2, window_sizes={"slow": 10})
    run(monitor, [{"fast": float(i), "slow": float(i)} for i in range(10)])
    monitor.update({"fast": 10.0, "slow": 10.0})
    assert monitor.window_size("fast") == 2 and monitor.window_size("slow") == 10 and monitor.window_size("other") == 2
    assert (monitor.count("fast"), monitor.avg("fast")) == (2, 9.5)
    assert (monitor.count("slow"), monitor.avg("slow")) == (10, 5.5)  # ticks 1..10


def test_set_window_size_shrinks_now_and_grows_without_resurrecting_values():
    monitor = TickMonitor(window_size=10)
    run(monitor, [{"x": float(i)} for i in range(10)])  # ticks 0..9, now at tick 10
    monitor.set_window_size("x", 3)  # ticks 8..10
    assert (monitor.count("x"), monitor.avg("x")) == (2, 8.5)
    monitor.set_window_size("x", 10)  # 0..7 are gone for good
    assert (monitor.count("x"), monitor.avg("x")) == (2, 8.5)
    run(monitor, [{"x": 10.0}, {"x": 11.0}])
    assert monitor.count("x") == 4 and monitor.avg("x") == (8 + 9 + 10 + 11) / 4
    monitor.set_window_size("new", 4)  # before the key exists
    run(monitor, [{"new": 1.0}] * 6)
    assert monitor.count("new") == 3  # window: the last 3 updated ticks + the current (empty) tick
    monitor.update({"new": 1.0})
    assert monitor.count("new") == 4


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "3", None])
def test_bad_window_sizes(size):
    with pytest.raises(ValueError, match="positive int"):
        TickMonitor(window_size=size)
    with pytest.raises(ValueError, match="'k'"):
        TickMonitor(window_sizes={"k": size})
    with pytest.raises(ValueError, match="'k'"):
        TickMonitor().set_window_size("k", size)


def test_window_sizes_must_be_a_mapping_of_string_keys():
    with pytest.raises(TypeError, match="mapping"):
        TickMonitor(window_sizes=[("k", 3)])
    with pytest.raises(TypeError, match="strings"):
        TickMonitor(window_sizes={3: 3})


def test_memory_is_bounded_by_the_window_without_any_query():
    monitor = TickMonitor(window_size=7)
    run(monitor, [{"x": 1.0, "y": 2.0} for _ in range(1000)])
    for key in ("x", "y"):
        window = monitor._windows[key]  # trimmed once per 7 ticks: at most 14 ticks of values
        assert len(window.vals) == len(window.ticks) <= 14
    assert all(len(record["values"]) <= 8 for record in monitor.state_dict()["keys"])  # 7 ticks + the edge tick


# ------------------------------------------------------------------------------------------ scalars
def test_accepted_scalars():
    monitor = TickMonitor()
    monitor.update(
        {
            "int": 3,
            "bool": True,
            "np_float32": np.float32(1.5),
            "np_int": np.int64(-4),
            "np_bool": np.bool_(False),
            "array0d": np.array(2.5),
            "array1": np.array([[6.0]]),
            "tensor": torch.tensor(0.25),
            "tensor1": torch.tensor([7.0]),
            "tensor_int": torch.tensor([5], dtype=torch.int64),
            "tensor_bool": torch.tensor(True),
            "tensor_grad": torch.tensor(2.0, requires_grad=True) * 2,
            "big_int": 2**70,
        }
    )
    expected = {
        "int": 3.0, "bool": 1.0, "np_float32": 1.5, "np_int": -4.0, "np_bool": 0.0, "array0d": 2.5,
        "array1": 6.0, "tensor": 0.25, "tensor1": 7.0, "tensor_int": 5.0, "tensor_bool": 1.0,
        "tensor_grad": 4.0, "big_int": float(2**70),
    }
    for key, value in expected.items():
        assert monitor.last(key) == value and type(monitor.last(key)) is float, key
        assert monitor.avg(key) == value


@pytest.mark.parametrize(
    "value, detail",
    [
        ("high", "str"),
        (None, "NoneType"),
        ([1.0], "list"),
        ({"v": 1.0}, "dict"),
        (1 + 2j, "complex"),
        (np.array([1.0, 2.0]), r"shape \(2,\)"),
        (np.array([]), r"shape \(0,\)"),
        (np.array(["a"]), "dtype <U1"),
        (np.datetime64("2024-01-01"), "dtype datetime64"),
        (np.complex64(1), "dtype complex64"),
        (torch.zeros(2, 2), r"shape \(2, 2\)"),
        (torch.tensor(1 + 1j), "complex"),
    ],
)
def test_non_scalar_values_raise_naming_the_key_and_record_nothing(value, detail):
    monitor = TickMonitor()
    monitor.update({"loss": 1.0})
    with pytest.raises(TypeError, match=rf"'bad_key'.*{detail}"):
        monitor.update({"loss": 5.0, "new": 2.0, "bad_key": value, "later": 1.0})
    # all-or-nothing: neither the values before the bad one nor the keys were recorded
    assert monitor.count("loss") == 1 and monitor.last("loss") == 1.0
    assert monitor.keys() == ["loss"]


def test_int_too_large_for_a_float_is_refused():
    monitor = TickMonitor()
    with pytest.raises(ValueError, match="'huge'.*too large"):
        monitor.update({"ok": 1.0, "huge": 10**400})
    assert monitor.keys() == []


def test_bad_keys_and_info():
    monitor = TickMonitor()
    with pytest.raises(TypeError, match="dict of scalars, got list"):
        monitor.update([("a", 1.0)])
    with pytest.raises(TypeError, match="keys must be strings, got int"):
        monitor.update({"a": 1.0, 3: 1.0})
    with pytest.raises(ValueError, match="non-empty"):
        monitor.update({"": 1.0})
    assert monitor.keys() == []


def test_accelerator_tensors_are_copied_with_one_transfer_per_update(monkeypatch):
    """Pretend CPU tensors live on an accelerator: they must be stacked and read with one tolist(),
    never with one item() per key."""
    monkeypatch.setattr(scalars, "CPU_DIRECT", False)
    calls = {"stack": 0}
    real_stack = torch.stack

    def counting_stack(*args, **kwargs):
        calls["stack"] += 1
        return real_stack(*args, **kwargs)

    def no_item(self):
        raise AssertionError("item() called: one device sync per key")

    monkeypatch.setattr(torch, "stack", counting_stack)
    monkeypatch.setattr(torch.Tensor, "item", no_item)
    monitor = TickMonitor()
    info = {f"loss{i}": torch.tensor(float(i) / 4) for i in range(12)}
    info["count"] = torch.tensor([3], dtype=torch.int64)  # mixed dtypes: promoted, still one copy
    info["flag"] = torch.tensor(True)
    info["plain"] = 2.0
    monitor.update(info)
    assert calls["stack"] == 1
    assert [monitor.last(f"loss{i}") for i in range(12)] == [i / 4 for i in range(12)]
    assert (monitor.last("count"), monitor.last("flag"), monitor.last("plain")) == (3.0, 1.0, 2.0)


def test_a_failed_device_copy_records_nothing(monkeypatch):
    monkeypatch.setattr(scalars, "CPU_DIRECT", False)  # take the accelerator path

    def failing_copy(tensors):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(scalars, "batched_to_floats", failing_copy)
    monitor = TickMonitor()
    monitor.update({"a": 1.0})
    with pytest.raises(TypeError, match="monitor values for 'g1', 'g2': cannot copy the tensors to the host .*illegal"):
        monitor.update({"a": 2.0, "g1": torch.tensor(1.0), "g2": torch.tensor(2.0)})
    assert monitor.count("a") == 1 and monitor.keys() == ["a"]


def test_batched_conversion_keeps_float64_precision():
    values = [torch.tensor(0.1, dtype=torch.float64), torch.tensor(1, dtype=torch.int64), torch.tensor(0.5)]
    assert scalars.batched_to_floats(values) == [0.1, 1.0, 0.5]


# -------------------------------------------------------------------------------------------- state
def test_state_dict_round_trip_mid_stream_through_a_checkpoint_file():
    monitor = TickMonitor(window_size=4, window_sizes={"aux": 6})
    stream = [{"loss": float(i), **({"aux": float(-i)} if i % 3 == 0 else {})} for i in range(11)]
    run(monitor, stream)
    monitor.update({"loss": float("nan")})
    monitor.update({"loss": 100.0})  # two values in the current tick
    buffer = io.BytesIO()
    torch.save(monitor.state_dict(), buffer)  # the learner's checkpoint format: plain types only
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    restored = TickMonitor(window_size=99)
    restored.load_state_dict(state)
    assert restored.tick_count == monitor.tick_count == 11
    assert restored.window_size("loss") == 4 and restored.window_size("aux") == 6
    for m in (monitor, restored):  # continue both the same way
        m.update({"loss": 1.0})
        run(m, [{"aux": 2.0}, {}, {"loss": 5.0}])
    for key in ("loss", "aux"):
        for stat in ("avg", "min", "max", "count", "nonfinite", "nonfinite_total", "last"):
            assert getattr(restored, stat)(key) == getattr(monitor, stat)(key), (key, stat)
    assert restored.keys() == monitor.keys() == ["loss", "aux"]


def _good_state():
    monitor = TickMonitor(window_size=3)
    run(monitor, [{"x": 1.0}, {"x": float("nan")}, {"x": 2.0}])
    monitor.update({"x": 4.0})
    return monitor.state_dict()


def _corrupt(path, value):
    state = _good_state()
    target = state
    for part in path[:-1]:
        target = target[part]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return state


_DELETE = object()


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("tick_count",), _DELETE, "missing 'tick_count'"),
        (("tick_count",), -1, "tick_count"),
        (("tick_count",), "3", "tick_count"),
        (("version",), 99, "version"),
        (("window_size",), 0, "window_size"),
        (("window_sizes",), [1], "window_sizes"),
        (("window_sizes",), {"x": -2}, "'x'"),
        (("keys",), "x", "'keys' must be a list"),
        (("keys", 0, "key"), 5, "bad key name"),
        (("keys", 0, "values"), None, "'values' and 'nonfinite' must be lists"),
        (("keys", 0, "values", 0), [0, 1.0, 1], "value 0: expected \\[tick, finite number\\]"),
        (("keys", 0, "values", 0, 1), float("nan"), "value 0: expected \\[tick, finite number\\]"),
        (("keys", 0, "values", 0, 0), 99, "value 0: tick 99 is not in the window \\[0, 3\\]"),
        (("keys", 0, "values", 2, 0), 1, "value ticks must not decrease, got 2 then 1"),
        (("keys", 0, "values", 0, 1), "s", "expected \\[tick"),
        (("keys", 0, "nonfinite", 0), "1", "nonfinite 0: tick '1' is not in the window"),
        (("keys", 0, "last"), "v", "'last'"),
        (("keys", 0, "last"), None, "no 'last' value"),
        (("keys", 0, "nonfinite_total"), 0, "smaller than the window"),
    ],
)
def test_load_state_dict_refuses_garbage_and_keeps_the_monitor(path, value, message):
    monitor = TickMonitor(window_size=5)
    monitor.update({"keep": 7.0})
    state = _corrupt(path, value)
    with pytest.raises(ValueError, match=message):
        monitor.load_state_dict(state)
    assert monitor.keys() == ["keep"] and monitor.avg("keep") == 7.0 and monitor.window_size("x") == 5


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda kept: kept.update({"0": {}}), "'0' is neither last_n, since_start nor a window size"),
        (lambda kept: kept.update({"last_n": {"n": 0, "values": []}}), "last_n n must be a positive int"),
        (lambda kept: kept["last_n"]["values"].append([99, 1.0]), "'last_n' values must be at most 2"),
        (lambda kept: kept["since_start"].update(tick="a"), "'since_start' must be a dict with before, tick"),
        (lambda kept: kept["since_start"].update(before=[1]), "since_start before: expected \\[sum, count"),
        (lambda kept: kept["5"]["values"].append([1, 1.0]), "window 5: value ticks must not decrease"),
        (lambda kept: kept.update({"5": []}), "expected a dict"),
    ],
)
def test_load_state_dict_refuses_garbage_in_what_keep_asked_for(change, message):
    monitor = TickMonitor(window_size=3)
    monitor.keep("x", window=5)
    monitor.keep("x", last_n=2)
    monitor.keep("x", since_start=True)
    run(monitor, [{"x": float(i)} for i in range(6)])
    state = monitor.state_dict()
    change(state["tracked"]["x"])
    fresh = TickMonitor(window_size=4)
    with pytest.raises(ValueError, match=message):
        fresh.load_state_dict(state)
    assert fresh.keys() == [] and fresh.window_size("x") == 4


def test_load_state_dict_refuses_non_mappings():
    with pytest.raises(TypeError, match="expects a dict"):
        TickMonitor().load_state_dict([1, 2])


# -------------------------------------------------------------------------- property test vs reference
class NaiveMonitor:
    """Keeps every (tick, value) pair and computes every statistic from scratch."""

    def __init__(self, window_size: int, window_sizes: Dict[str, int]) -> None:
        self.default = window_size
        self.sizes = dict(window_sizes)
        self.now = 0
        self.values: Dict[str, List[Tuple[int, float]]] = {}
        self.floor: Dict[str, int] = {}

    def size(self, key: str) -> int:
        return self.sizes.get(key, self.default)

    def update(self, info: Dict[str, float]) -> None:
        for key, value in info.items():
            self.values.setdefault(key, []).append((self.now, float(value)))

    def set_window_size(self, key: str, size: int) -> None:
        if key in self.values:  # values that already left the old window never come back
            self.floor[key] = max(self.floor.get(key, 0), self.now - self.size(key) + 1)
        self.sizes[key] = size

    def window(self, key: str, end: Optional[int] = None) -> List[float]:
        end = self.now if end is None else end
        start = max(end - self.size(key) + 1, self.floor.get(key, 0))
        return [v for t, v in self.values.get(key, []) if start <= t <= end]

    def finite(self, key: str) -> List[float]:
        return [v for v in self.window(key) if math.isfinite(v)]


KEYS = ["a", "b", "c", "d"]
special = st.sampled_from([math.nan, math.inf, -math.inf])
finite_values = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.integers(-1000, 1000)
values = st.one_of(finite_values, finite_values, finite_values, special, st.booleans())
info_dicts = st.dictionaries(st.sampled_from(KEYS), values, min_size=1, max_size=4)
OP_STRATEGIES = {
    "update": st.tuples(st.just("update"), info_dicts),
    "tick": st.tuples(st.just("tick"), st.sampled_from([1, 1, 1, 1, 2, 3, 9])),
    "check": st.tuples(st.just("check")),
    "set_window": st.tuples(st.just("set_window"), st.sampled_from(KEYS), st.integers(1, 12)),
    "roundtrip": st.tuples(st.just("roundtrip")),
}
# weighted: updates and ticks are most of a real stream
OP_WEIGHTS = ["update"] * 5 + ["tick"] * 5 + ["check"] * 2 + ["set_window", "roundtrip"]
ops = st.lists(st.sampled_from(OP_WEIGHTS).flatmap(OP_STRATEGIES.__getitem__), min_size=10, max_size=80)


def as_input(value):
    """Feed some values as numpy scalars / tensors to exercise every conversion path."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 100:
        return np.float64(value)
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 10:
        return torch.tensor(value, dtype=torch.float64)
    return value


def check_same(monitor: TickMonitor, ref: NaiveMonitor) -> None:
    assert monitor.tick_count == ref.now
    for key in KEYS:
        window = ref.window(key)
        finite = ref.finite(key)
        assert monitor.count(key) == len(finite), key
        assert monitor.nonfinite(key) == len(window) - len(finite), key
        history = [v for _, v in ref.values.get(key, [])]
        last = monitor.last(key)
        if not history:
            assert last is None
        else:
            assert last == history[-1] or (math.isnan(last) and math.isnan(history[-1]))
        assert monitor.nonfinite_total(key) == sum(not math.isfinite(v) for v in history)
        if not finite:
            assert monitor.avg(key) is None and monitor.min(key) is None and monitor.max(key) is None
            continue
        assert monitor.min(key) == min(finite) and monitor.max(key) == max(finite)
        tolerance = 1e-12 * math.fsum(abs(v) for v in finite) + 1e-300
        assert abs(monitor.avg(key) * len(finite) - math.fsum(finite)) <= tolerance * len(finite) + tolerance
    assert [k for k in monitor.keys()] == [k for k in ref.values]
    check_previous_tick(monitor, ref)


def check_previous_tick(monitor: TickMonitor, ref: NaiveMonitor) -> None:
    """Every windowed query with end=tick_count-1 (the window of the tick just completed)."""
    end = monitor.tick_count - 1
    for key in KEYS:
        window = ref.window(key, end)
        finite = [v for v in window if math.isfinite(v)]
        stat = monitor.window_stat(key, end=end)
        assert monitor.count(key, end=end) == stat.count == len(finite), key
        assert monitor.nonfinite(key, end=end) == stat.nonfinite == len(window) - len(finite), key
        if not finite:
            assert monitor.avg(key, end=end) is None and monitor.min(key, end=end) is None
            assert monitor.max(key, end=end) is None and monitor.last(key, end=end) is None and stat.last is None
            continue
        assert monitor.min(key, end=end) == stat.min == min(finite) and monitor.max(key, end=end) == max(finite)
        assert monitor.last(key, end=end) == stat.last == finite[-1]
        scale = math.fsum(abs(v) for v in finite) + 1e-300
        assert abs(monitor.avg(key, end=end) * len(finite) - math.fsum(finite)) <= 1e-12 * scale * (len(finite) + 1)
        assert abs(stat.sumsq - math.fsum(v * v for v in finite)) <= 1e-12 * math.fsum(v * v for v in finite) * len(finite) + 1e-300


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    window_size=st.integers(1, 12),
    window_sizes=st.dictionaries(st.sampled_from(KEYS), st.integers(1, 12), max_size=2),
    operations=ops,
)
def test_matches_naive_reference(window_size, window_sizes, operations):
    monitor = TickMonitor(window_size=window_size, window_sizes=window_sizes)
    ref = NaiveMonitor(window_size, window_sizes)
    for op in operations:
        if op[0] == "update":
            monitor.update({k: as_input(v) for k, v in op[1].items()})
            ref.update(op[1])
        elif op[0] == "tick":
            for _ in range(op[1]):
                monitor.tick()
                ref.now += 1
        elif op[0] == "set_window":
            monitor.set_window_size(op[1], op[2])
            ref.set_window_size(op[1], op[2])
        elif op[0] == "roundtrip":
            restored = TickMonitor(window_size=1)
            restored.load_state_dict(monitor.state_dict())
            monitor = restored
        else:  # queries only now and then: they expire old ticks, which must not change any result
            check_same(monitor, ref)
    check_same(monitor, ref)


@settings(max_examples=60, deadline=None)
@given(
    period=st.integers(1, 30),
    window=st.integers(1, 30),
    n_ticks=st.integers(1, 120),
)
def test_periodic_key_count_is_exact(period, window, n_ticks):
    """A key reported every ``period`` ticks has exactly the number of its ticks inside the window."""
    monitor = TickMonitor(window_size=window)
    for t in range(n_ticks):
        if t % period == 0:
            monitor.update({"k": float(t)})
        monitor.tick()
    now = n_ticks
    expected = [float(t) for t in range(max(0, now - window + 1), now) if t % period == 0]
    assert monitor.count("k") == len(expected)
    assert monitor.avg("k") == (sum(expected) / len(expected) if expected else None)  # small ints: exact
    assert (monitor.min("k"), monitor.max("k")) == ((min(expected), max(expected)) if expected else (None, None))


dense_ticks = st.lists(
    st.tuples(st.dictionaries(st.sampled_from(KEYS[:2]), values, max_size=2), st.booleans(), st.booleans()),
    min_size=20,
    max_size=150,
)


@settings(max_examples=80, deadline=None)
@given(window_size=st.integers(1, 9), ticks=dense_ticks, plain=st.booleans(), roundtrip_at=st.integers(0, 150))
def test_dense_streams_match_naive_reference(window_size, ticks, plain, roundtrip_at):
    """One (sparse) dict per tick, sometimes two updates in a tick, queries at random ticks: exercises
    the expiry of old ticks in steady state. ``plain`` feeds Python floats only (the unchecked fast
    path of ``update``); the monitor is restored from its state dict once, mid-stream."""
    monitor = TickMonitor(window_size=window_size)
    ref = NaiveMonitor(window_size, {})
    for index, (info, twice, query) in enumerate(ticks):
        if index == roundtrip_at:
            restored = TickMonitor(window_size=1)
            restored.load_state_dict(monitor.state_dict())
            monitor = restored
        for _ in range(2 if twice else 1):
            monitor.update({k: float(v) if plain else as_input(v) for k, v in info.items()})
            ref.update(info)
        if query:
            check_same(monitor, ref)
        monitor.tick()
        ref.now += 1
    check_same(monitor, ref)


# ------------------------------------------------------------------------------------------- end=
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), window=st.integers(200, 700), nonfinite_rate=st.sampled_from([0.0, 0.02]))
def test_long_windows_match_naive_reference(seed, window, nonfinite_rate):
    """Windows of hundreds of values (their min, max and sum of squares are taken with numpy): exact numbers
    against a naive reference, the mean against exact rational arithmetic, before and after a round trip."""
    rng = np.random.default_rng(seed)
    monitor, ref = TickMonitor(window_size=window), NaiveMonitor(window, {})
    for _ in range(2 * window + 37):
        for _ in range(int(rng.integers(0, 3))):
            value = float(rng.normal() * 10.0 ** rng.integers(-3, 6))
            value = float(rng.choice([math.nan, math.inf])) if rng.random() < nonfinite_rate else value
            monitor.update({"a": value})
            ref.update({"a": value})
        monitor.tick()
        ref.now += 1
    restored = TickMonitor()
    restored.load_state_dict(monitor.state_dict())
    for m in (monitor, restored):
        for end in (None, m.tick_count - 1):
            window_values = ref.window("a", end)
            finite = [v for v in window_values if math.isfinite(v)]
            stat = m.window_stat("a", end)
            assert (stat.count, stat.nonfinite) == (len(finite), len(window_values) - len(finite))
            assert (stat.min, stat.max, stat.last) == (min(finite), max(finite), finite[-1])
            assert stat.avg == float(sum(map(Fraction, finite)) / len(finite))
            squares = math.fsum(v * v for v in finite)
            assert abs(stat.sumsq - squares) <= 1e-12 * squares
            assert m.window_values("a", end) == finite


def test_end_previous_tick_is_the_window_of_the_tick_just_completed():
    """A policy reporting value = iteration: at iteration 63 with a 7-tick window the mean is 60.0."""
    monitor = TickMonitor(window_size=7)
    for it in range(64):
        monitor.update({"v": float(it)})
        monitor.tick()
    assert monitor.tick_count == 64
    assert monitor.avg("v", end=63) == 60.0 and monitor.count("v", end=63) == 7
    assert monitor.avg("v") == 60.5  # the window of the current tick 64 holds 58..63
    stat = monitor.window_stat("v", end=63)
    assert (stat.sum, stat.count, stat.min, stat.max, stat.last) == (420.0, 7, 57.0, 63.0, 63.0)
    assert stat.sumsq == sum(float(i * i) for i in range(57, 64))
    restored = TickMonitor()
    restored.load_state_dict(monitor.state_dict())  # the edge tick travels with the state
    assert restored.window_stat("v", end=63) == stat and restored.window_stat("v") == monitor.window_stat("v")


def test_end_leaves_out_the_current_tick_and_bad_ends_raise():
    monitor = TickMonitor(window_size=3)
    assert monitor.avg("x", end=-1) is None and monitor.window_stat("x", end=-1).count == 0
    monitor.update({"x": 1.0})
    monitor.tick()
    monitor.update({"x": 5.0, "y": float("nan")})
    assert monitor.avg("x") == 3.0 and monitor.avg("x", end=0) == 1.0 and monitor.last("x", end=0) == 1.0
    assert monitor.nonfinite("y") == 1 and monitor.nonfinite("y", end=0) == 0
    for end in (-1, 2, 5, True, 0.5):
        with pytest.raises(ValueError, match=rf"end={end!r} is not a valid last tick"):
            monitor.avg("x", end=end)
        with pytest.raises(ValueError, match=rf"end={end!r}"):
            monitor.window_stat("x", end=end)


def test_a_kept_last_n_ring_takes_every_value_the_window_takes():
    """A huge finite value (beyond HistoryBuffer's averaging limit) is recorded in the key's window and in its
    last-n ring alike: the update does not raise half-way, and both report it."""
    monitor = TickMonitor(window_size=5)
    monitor.keep("x", last_n=3)
    monitor.update({"x": 1e300})
    monitor.update({"x": 2.0})
    assert monitor.window_stat("x").max == monitor.window_stat("x", last_n=3).max == 1e300
    assert monitor.window_stat("x", last_n=3).count == monitor.count("x") == 2
    fresh = TickMonitor(window_size=5)
    fresh.load_state_dict(monitor.state_dict())
    assert fresh.window_stat("x", last_n=3).max == 1e300


def test_keep_other_windows_last_n_and_since_start_survive_a_resume():
    monitor = TickMonitor(window_size=2)
    monitor.keep("r", window=5)
    monitor.keep("r", last_n=3)
    monitor.keep("r", since_start=True)
    for it in range(8):
        monitor.update({"r": float(it)})
        if it == 6:
            monitor.update({"r": float("inf")})
        monitor.tick()
    state = monitor.state_dict()
    fresh = TickMonitor(window_size=2)
    fresh.keep("r", last_n=2)  # asked before the load: kept, and the loaded (larger) ring wins
    fresh.load_state_dict(state)
    for m in (monitor, fresh):
        assert m.window_stat("r", window=5).avg == 5.5 and m.window_stat("r", window=5).nonfinite == 1  # ticks 4..8
        last3 = m.window_stat("r", last_n=3)
        assert (last3.count, last3.nonfinite, last3.sum, last3.last) == (2, 1, 13.0, 7.0)
        glob = m.window_stat("r", since_start=True)
        assert (glob.sum, glob.count, glob.min, glob.max, glob.nonfinite) == (28.0, 8, 0.0, 7.0, 1)
        m.update({"r": 100.0})  # the current tick: left out with end=tick_count-1
        assert m.window_stat("r", end=7, since_start=True).sum == 28.0
        assert m.window_stat("r", since_start=True).sum == 128.0
        assert m.window_stat("r", last_n=3).max == 100.0
    with pytest.raises(ValueError, match="no window of 4 ticks kept for 'r'"):
        monitor.window_stat("r", window=4)
    with pytest.raises(ValueError, match="keeps no since-start aggregate"):
        monitor.window_stat("other", since_start=True)
    with pytest.raises(ValueError, match="at most one"):
        monitor.window_stat("r", window=5, last_n=3)


# ------------------------------------------------------------------------------------ update_columns
column_lists = st.dictionaries(st.sampled_from(KEYS), st.lists(values, min_size=0, max_size=5), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(column_lists, st.integers(0, 3)), min_size=1, max_size=12), st.integers(1, 6))
def test_update_columns_equals_one_update_per_position(stream, window):
    """update_columns(columns) leaves the monitor exactly as one update per position i (the keys whose list is
    longer than i), which is how the learner recorded collect-side metrics before: same state, same statistics."""
    fast, slow = TickMonitor(window_size=window), TickMonitor(window_size=window)
    fast.keep("a", since_start=True, last_n=3)
    slow.keep("a", since_start=True, last_n=3)
    for columns, ticks in stream:
        fast.update_columns(columns)
        for i in range(max(len(v) for v in columns.values())):
            step = {key: v[i] for key, v in columns.items() if i < len(v)}
            if step:
                slow.update(step)
        for _ in range(ticks):
            fast.tick()
            slow.tick()
    assert repr(fast.state_dict()) == repr(slow.state_dict())  # repr: NaN equals NaN
    for key in KEYS:
        for end in (None, fast.tick_count - 1):
            assert repr(fast.window_stat(key, end)) == repr(slow.window_stat(key, end))
        assert fast.last(key) == slow.last(key) or (math.isnan(fast.last(key)) and math.isnan(slow.last(key)))


def test_update_columns_is_all_or_nothing_and_names_the_culprit():
    monitor = TickMonitor(window_size=5)
    monitor.update_columns({"eps": [0.5, 0.25], "temp": (2.0,)})
    assert monitor.count("eps") == 2 and monitor.avg("eps") == 0.375 and monitor.last("temp") == 2.0
    with pytest.raises(TypeError, match=r"'eps'.*str"):
        monitor.update_columns({"temp": [4.0], "eps": [1.0, "x"]})
    with pytest.raises(TypeError, match=r"values of 'eps' must be a list or tuple, got float"):
        monitor.update_columns({"eps": 1.0})
    with pytest.raises(TypeError, match="expects a dict"):
        monitor.update_columns([("eps", [1.0])])
    assert monitor.count("eps") == 2 and monitor.count("temp") == 1  # nothing of the failed calls was recorded
    monitor.update_columns({"new": []})  # an empty column records nothing and creates no key
    assert "new" not in monitor.keys()
