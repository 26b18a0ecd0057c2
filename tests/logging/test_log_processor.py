"""LogProcessor on TickMonitor: names, windows (ticks, last_n, 'global'), values, validation, resume."""

import math

import numpy as np
from typing import Dict, List, Tuple

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlearn.distributed import WindowStat, merge_window_stats
from rlearn.logging import LogProcessor, LogProcessorConfigError
from rlearn.monitor import TickMonitor


def _monitor(window=10, processor=None):
    """20 ticks: loss = i, time = i / 10, lr = i / 100, episode = i (i = 1..20); val/acc once, at the end."""
    monitor = TickMonitor(window_size=window)
    if processor is not None:
        processor.prepare(monitor)
    for i in range(1, 21):
        monitor.update({"train/loss": float(i), "train/time": i / 10, "train/lr": i / 100, "train/episode": i})
        if i == 20:
            monitor.update({"val/acc": 0.9})
        monitor.tick()
    return monitor


def _values(processor, monitor, keys=None, end=None):
    keys = monitor.keys() if keys is None else keys
    return processor.values(processor.window_stats(monitor, keys, end=end))


def test_default_statistic_is_the_mean_over_the_key_window():
    processor = LogProcessor()
    out = _values(processor, _monitor(), end=19)  # after the last tick: the window of ticks 10..19
    assert list(out) == ["train/loss_avg", "train/time_avg", "train/lr_avg", "train/episode_avg", "val/acc_avg"]
    assert out["train/loss_avg"] == sum(range(11, 21)) / 10  # 15.5: windowed mean
    assert out["train/time_avg"] == pytest.approx(1.55, rel=1e-15)
    assert out["val/acc_avg"] == 0.9
    # at the current tick (20, nothing recorded yet) the window is ticks 11..20: one value fewer
    assert _values(processor, _monitor())["train/loss_avg"] == sum(range(12, 21)) / 9


def test_mmengine_doc_override_and_add():
    cfg = [dict(data_src="train/loss", method_name="mean", window_size="global")]
    processor = LogProcessor(custom_cfg=cfg)
    monitor = _monitor(processor=processor)
    assert _values(processor, monitor, ["train/loss"]) == {"train/loss_avg": 10.5}
    added = LogProcessor(custom_cfg=[dict(data_src="train/loss", log_name="loss_min", method_name="min", window_size=100)])
    monitor = _monitor(processor=added)
    out = _values(added, monitor, ["train/loss", "train/lr"], end=19)
    assert list(out) == ["train/loss_avg", "train/loss_min", "train/lr_avg"]  # an added statistic follows its key
    assert out["train/loss_avg"] == 15.5 and out["train/loss_min"] == 1.0
    glob = LogProcessor(custom_cfg=[dict(data_src="train/lr", log_name="lr_max", method_name="max", window_size="global")])
    assert _values(glob, _monitor(processor=glob), ["train/lr"])["train/lr_max"] == 0.2
    current = LogProcessor(custom_cfg=[dict(data_src="train/loss", method_name="current")])
    assert _values(current, _monitor(processor=current), ["train/loss"]) == {"train/loss_last": 20.0}
    window = LogProcessor(custom_cfg=[dict(data_src="train/episode", method_name="min", window_size=4)])
    assert _values(window, _monitor(processor=window), ["train/episode"], end=19) == {"train/episode_min": 17.0}
    counted = LogProcessor(custom_cfg=[dict(data_src="train/loss", log_name="n", method_name="count"),
                            dict(data_src="train/loss", log_name="loss_std", method_name="std")])
    out = _values(counted, _monitor(processor=counted), ["train/loss"], end=19)
    assert out["train/n"] == 10 and out["train/loss_std"] == pytest.approx(math.sqrt(8.25), rel=1e-12)


def test_episode_return_mean_and_max_over_the_last_100_episodes():
    """The docs' example: mean over the default window, max over the last 100 episodes, across a resume."""
    cfg = [dict(data_src="collector/episode_return", method_name="max", log_name="episode_return_max100", last_n=100)]
    processor = LogProcessor(custom_cfg=cfg)
    monitor = TickMonitor(window_size=10)
    processor.prepare(monitor)
    returns = [float((7 * i) % 150) for i in range(300)]
    for tick in range(60):  # 5 episodes per tick
        monitor.update({"loss": 1.0})
        for i in range(5 * tick, 5 * tick + 5):
            monitor.update({"collector/episode_return": returns[i]})
        if tick == 30:  # resume mid-run: a fresh monitor (prepared again) loads the state
            state = monitor.state_dict()
            monitor = TickMonitor(window_size=10)
            processor.prepare(monitor)
            monitor.load_state_dict(state)
        monitor.tick()
    out = _values(processor, monitor, ["collector/episode_return"], end=59)
    assert list(out) == ["collector/episode_return_avg", "collector/episode_return_max100"]
    assert out["collector/episode_return_avg"] == pytest.approx(sum(returns[250:300]) / 50, rel=1e-12)
    assert out["collector/episode_return_max100"] == max(returns[200:300])


def test_absent_source_is_not_fabricated_and_nan_is_counted_not_averaged():
    monitor = TickMonitor(window_size=5)
    processor = LogProcessor(custom_cfg=[dict(data_src="actor_loss", log_name="actor_min", method_name="min")])
    monitor.update({"loss": math.nan})
    stats = processor.window_stats(monitor, ["loss", "actor_loss"])
    assert processor.values(stats) == {"loss_avg": None, "loss_nonfinite": 1, "actor_loss_avg": None, "actor_min": None}
    monitor.update({"loss": 2.0})
    assert processor.values(processor.window_stats(monitor, ["loss"])) == {"loss_avg": 2.0, "loss_nonfinite": 1}
    assert WindowStat(0.0, 0, None, None).statistic("count") == 0


def test_values_of_merged_ranks_by_presence():
    processor = LogProcessor(custom_cfg=[dict(data_src="x", log_name="x_last", method_name="current")])
    ranks = []
    for values in ([1.0, 2.0], [], [4.0]):
        monitor = TickMonitor(window_size=3)
        for v in values:
            monitor.update({"x": v})
        ranks.append({n: s for n, s in processor.window_stats(monitor, ["x"]).items() if s.count or s.nonfinite})
    out = processor.values(merge_window_stats(ranks))
    assert out == {"x_avg": 7.0 / 3, "x_last": 2.0}  # the lowest rank that has one


def test_name_collisions_at_run_time():
    processor = LogProcessor(custom_cfg=[dict(data_src="loss", log_name="loss_min_avg", method_name="min")])
    monitor = TickMonitor()
    monitor.update({"loss": 1.0, "loss_min": 5.0})
    with pytest.raises(LogProcessorConfigError, match=r"'loss_min_avg' is produced by both 'loss' and 'loss_min'"):
        processor.window_stats(monitor, ["loss", "loss_min"])


def test_window_stats_needs_prepare():
    processor = LogProcessor(custom_cfg=[dict(data_src="x", log_name="x_max9", method_name="max", last_n=9)])
    monitor = TickMonitor()
    monitor.update({"x": 1.0})
    with pytest.raises(ValueError, match=r"last 9 values of 'x' are not kept"):
        processor.window_stats(monitor, ["x"])
    processor.prepare(monitor)
    processor.prepare(monitor)  # idempotent
    monitor.update({"x": 3.0})
    assert processor.values(processor.window_stats(monitor, ["x"])) == {"x_avg": 2.0, "x_max9": 3.0}


@pytest.mark.parametrize(
    "cfg, match",
    [
        ([dict(method_name="mean")], r"custom_cfg\[0\] is missing the required field 'data_src'"),
        ([dict(data_src="loss")], r"missing the required field 'method_name'"),
        ([dict(data_src="loss", method_name="median")], r"custom_cfg\[0\].*method_name 'median' is unknown.*mean"),
        ([dict(data_src="loss", method_name="mean", window_size=0)], r"'loss'.*window_size must be a positive int or 'global'"),
        ([dict(data_src="loss", method_name="mean", window_size=2.5)], "window_size"),
        ([dict(data_src="loss", method_name="mean", window_size="epoch")], "'epoch' windows are not supported"),
        ([dict(data_src="loss", method_name="mean", last_n=0)], r"custom_cfg\[0\].*last_n must be a positive int"),
        ([dict(data_src="loss", method_name="max", last_n=5, window_size=3)], r"custom_cfg\[0\].*window_size and last_n are exclusive"),
        (
            [dict(data_src="a", log_name="x", method_name="min"), dict(data_src="b", log_name="x", method_name="max")],
            r"custom_cfg\[1\].*log_name: custom_cfg\[0\] already produces 'x'",
        ),
        (
            [dict(data_src="loss", method_name="min"), dict(data_src="loss", method_name="max")],
            r"custom_cfg\[1\].*method_name: custom_cfg\[0\] already replaces the statistic of 'loss'",
        ),
        (
            [dict(data_src="lr", method_name="max"), dict(data_src="loss", log_name="lr_avg", method_name="min")],
            r"custom_cfg\[1\].*log_name 'lr_avg' is the default name of 'lr'",
        ),
        ([dict(data_src="loss", log_name="", method_name="min")], "log_name must be a non-empty str"),
        ([dict(data_src="loss", method_name="mean", scale=2)], r"custom_cfg\[0\].*unknown field\(s\) \['scale'\]"),
        (dict(data_src="loss", method_name="mean"), "list of dicts"),
        (["loss"], r"custom_cfg\[0\] must be a dict"),
    ],
)
def test_validation_errors(cfg, match):
    with pytest.raises(LogProcessorConfigError, match=match):
        LogProcessor(custom_cfg=cfg)
    assert issubclass(LogProcessorConfigError, ValueError)


def test_add_later_is_validated_against_earlier_entries():
    processor = LogProcessor(custom_cfg=[dict(data_src="eval/return", method_name="max")])
    with pytest.raises(LogProcessorConfigError, match=r"custom_cfg\[1\]"):
        processor.add(dict(data_src="eval/return", method_name="min"))
    processor.add(dict(data_src="eval/return", method_name="min", log_name="return_min"))
    assert [e["name"] for e in processor.custom_cfg] == ["eval/return_max", "eval/return_min"]


# ----------------------------------------------------------------------- property test vs a naive reference
METHODS = ["mean", "min", "max", "current", "count", "std"]
special = st.sampled_from([math.nan, math.inf])
value = st.one_of(st.integers(-50, 50).map(float), st.integers(-50, 50).map(float), special)
ticks = st.lists(st.dictionaries(st.sampled_from(["a", "b"]), st.lists(value, min_size=1, max_size=3), max_size=2),
                 min_size=1, max_size=40)
entry = st.fixed_dictionaries(
    {"data_src": st.sampled_from(["a", "b"]), "method_name": st.sampled_from(METHODS)},
    optional={"window": st.one_of(st.integers(1, 8), st.just("global"), st.integers(1, 12).map(lambda n: ("last", n)))},
)


def naive(history: List[Tuple[int, float]], method: str, window, end: int, own: int):
    if window is None or isinstance(window, int):
        size = own if window is None else window
        values = [v for t, v in history if end - size < t <= end]
    elif window == "global":
        values = [v for t, v in history if t <= end]
    else:
        values = [v for t, v in history if t <= end]
        values = values[-window[1]:]
    finite = [v for v in values if math.isfinite(v)]
    if method == "count":
        return len(finite)
    if not finite:
        return None
    return {
        "mean": lambda: sum(finite) / len(finite), "min": lambda: min(finite), "max": lambda: max(finite),
        "current": lambda: finite[-1],
        "std": lambda: math.sqrt(sum((v - sum(finite) / len(finite)) ** 2 for v in finite) / len(finite)),
    }[method]()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=st.lists(entry, max_size=4), stream=ticks, own=st.integers(1, 6), roundtrip=st.integers(0, 45),
       previous=st.booleans())
def test_windows_match_a_naive_reference(entries, stream, own, roundtrip, previous):
    cfg = []
    for i, e in enumerate(entries):
        item = {"data_src": e["data_src"], "method_name": e["method_name"], "log_name": f"s{i}"}
        window = e.get("window")
        if isinstance(window, tuple):
            item["last_n"] = window[1]
        elif window is not None:
            item["window_size"] = window
        cfg.append(item)
    processor = LogProcessor(custom_cfg=cfg)
    monitor = TickMonitor(window_size=own)
    processor.prepare(monitor)
    history: Dict[str, List[Tuple[int, float]]] = {"a": [], "b": []}
    for tick, info in enumerate(stream):
        if tick == roundtrip:
            restored = TickMonitor(window_size=own)
            restored.load_state_dict(monitor.state_dict())
            processor.prepare(restored)  # after the load: must not lose what the state brought
            monitor = restored
        for key, values in info.items():
            for v in values:
                monitor.update({key: torch.tensor(v, dtype=torch.float64) if v == 1.0 else v})
                history[key].append((tick, v))
        if tick < len(stream) - 1:
            monitor.tick()
    now = len(stream) - 1
    end = now - 1 if previous else now
    out = _values(processor, monitor, ["a", "b"], end=end if previous else None)
    for i, e in enumerate(entries):
        window = e.get("window")
        expected = naive(history[e["data_src"]], e["method_name"], window, end, own)
        got = out[f"s{i}"]
        if isinstance(window, tuple) and previous:
            # the ring keeps the last n values; values of the current tick are left out of them
            kept = [v for t, v in history[e["data_src"]]][-window[1]:]
            dropped = sum(1 for t, v in history[e["data_src"]] if t > end)
            values = kept[: max(0, len(kept) - dropped)]
            expected = naive([(0, v) for v in values], e["method_name"], "global", 0, own)
        if expected is None:
            assert got is None, (i, e)
        else:
            assert got == pytest.approx(expected, rel=1e-9, abs=1e-9), (i, e, got, expected)
    for key in ("a", "b"):
        assert out[f"{key}_avg"] == (None if naive(history[key], "mean", None, end, own) is None
                                     else pytest.approx(naive(history[key], "mean", None, end, own), rel=1e-12))
        bad = sum(1 for t, v in history[key] if end - own < t <= end and not math.isfinite(v))
        assert out.get(f"{key}_nonfinite", 0) == bad


def test_mmengine_doc_scalars_example_through_the_path():
    """MMEngine's MessageHub scalar example (loss 1 then 3: current 3, mean 2), through TickMonitor."""
    processor = LogProcessor(custom_cfg=[dict(data_src="train/loss", log_name="loss_now", method_name="current")])
    monitor = TickMonitor(window_size=5)
    monitor.update({"train/loss": 1})
    assert processor.values(processor.window_stats(monitor, ["train/loss"]))["train/loss_now"] == 1.0
    monitor.update({"train/loss": torch.tensor(3)})
    monitor.update({"train/lr": 0.1, "train/time": 0.1, "train/data_time": 0.1})
    out = processor.values(processor.window_stats(monitor, monitor.keys()))
    assert out == {"train/loss_avg": 2.0, "train/loss_now": 3.0, "train/lr_avg": 0.1, "train/time_avg": 0.1,
                   "train/data_time_avg": 0.1}
    with pytest.raises(TypeError, match=r"'train/loss'.*shape \(2,\)"):
        monitor.update({"train/lr": 0.2, "train/loss": torch.zeros(2)})
    assert monitor.count("train/lr") == 1  # all-or-nothing


def test_registered_statistic_over_merged_ranks_sees_every_ranks_values():
    """A registered statistic is computed on the window's values of every rank (in rank order), not on a
    merge of per-rank results; ranks without values add none."""
    from rlearn.monitor import HistoryBuffer

    saved = dict(HistoryBuffer._statistics_methods)

    @HistoryBuffer.register_statistics
    def median(self, window_size=None):
        return float(np.median(self._log_history[-(window_size or len(self)):]))

    try:
        processor = LogProcessor(custom_cfg=[dict(data_src="x", method_name="median", log_name="x_median", window_size=2)])
        ranks = []
        for values in ([1.0, 2.0, math.nan], [], [10.0, 20.0, 30.0]):
            monitor = TickMonitor(window_size=5)
            processor.prepare(monitor)
            for i, v in enumerate(values):
                if i:
                    monitor.tick()
                monitor.update({"x": v})
            stats = processor.window_stats(monitor, ["x"])
            ranks.append({n: s for n, s in stats.items() if s.count or s.nonfinite})
        merged = merge_window_stats(ranks)
        assert merged["x_median"].values == (2.0, 20.0, 30.0)  # each rank's 2-tick window, finite values only
        assert processor.values(merged) == {"x_avg": 63.0 / 5, "x_nonfinite": 1, "x_median": 20.0}
    finally:
        HistoryBuffer._statistics_methods.clear()
        HistoryBuffer._statistics_methods.update(saved)
