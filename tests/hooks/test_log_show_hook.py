"""LogShowHook: table text, TensorBoard points read back with TensorBoard's EventAccumulator, warnings."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.base import Policy
from rlearn.hooks import LogShowHook
from rlearn.writers import Writer, format_value, horizontal_tables, tb_tags
from rlearn.writers.table import parse_table
from rlearn.learner import BaseLearner

F32 = np.float32


class PeriodicPolicy(Policy):
    """``loss`` = n every iteration, ``aux`` = 100 + n every 5 iterations, ``never`` declared, never sent.
    ``nan_at`` makes ``loss`` NaN at those iterations; ``extra`` adds an undeclared key."""

    default_config = {"nan_at": [], "extra": False}

    def _init_learn(self):
        self.net = torch.nn.Linear(1, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.25)
        self.n = 0

    def _forward_learn(self, data):
        self.n += 1
        info = {"loss": math.nan if self.n in self.cfg["nan_at"] else float(self.n)}
        if self.n % 5 == 0:
            info["aux"] = 100.0 + self.n
        if self.cfg["extra"]:
            info["surprise"] = np.float32(2 * self.n)
        return info

    def _monitor_vars_learn(self):
        return ["loss", "aux", "never"]

    def _forward_collect(self, obs, envstep):
        return {"action": np.zeros(len(obs))}

    def _forward_eval(self, obs):
        return np.zeros(len(obs))

    def optimizers(self):
        return {"opt": self.opt}


class ListHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


def make(tmp_path, iters=40, policy_cfg=None, hook=None, width=400, **cfg):
    logger = logging.getLogger(f"rlearn.test.logshow.{tmp_path.name}")
    logger.setLevel(logging.INFO)
    handler = ListHandler()
    logger.addHandler(handler)
    learner = BaseLearner(
        PeriodicPolicy(policy_cfg, None, None),
        dict(dict(log_freq=10, monitor_window=10), **cfg),
        work_dir=tmp_path,
        logger=logger,
    )
    learner.register_hook(hook or LogShowHook(width=width), "BELOW_NORMAL")
    learner.call_hook("before_run")
    for i in range(1, iters + 1):
        learner.train(None, envstep=7 * i)
    learner.call_hook("after_run")
    return learner, handler.records


def read_scalars(logdir):
    acc = EventAccumulator(str(logdir), purge_orphaned_data=False, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def parse_tables(text):
    """{column: cell} of one logged table (heading and blocks)."""
    return parse_table(text)


def tables(records):
    return [r.getMessage() for r in records if r.levelno == logging.INFO and r.getMessage().startswith("train_iter")]


def warnings_of(records):
    return [r.getMessage() for r in records if r.levelno == logging.WARNING]


def test_periodic_key_tensorboard_points_exact(tmp_path):
    make(tmp_path)
    got = read_scalars(tmp_path / "tb")
    metric_tags = {t for t in got if not t.startswith(("throughput", "time"))}
    assert metric_tags == {
        "learner_iter/loss_avg",
        "learner_step/loss_avg",
        "learner_iter/aux_avg",
        "learner_step/aux_avg",
        "learner_iter/cur_lr_avg",
        "learner_step/cur_lr_avg",
    }
    assert set(got) - metric_tags == {
        "throughput_iter/iters_per_sec",
        "throughput_iter/env_steps_per_sec",
        "throughput_step/iters_per_sec",
        "throughput_step/env_steps_per_sec",
        "time_iter/eval_s",
        "time_step/eval_s",
        "time_iter/checkpoint_s",
        "time_step/checkpoint_s",
    }
    for tag in ("time_iter/eval_s", "time_iter/checkpoint_s"):  # no evaluation, no checkpoint: 0 s left out
        assert got[tag] == [(s, 0.0) for s in (10, 20, 30, 40)]
    # loss: mean of the 10 values of the window; aux: mean of its 2 values (iterations 5k and 5k+5)
    assert got["learner_iter/loss_avg"] == [(10, 5.5), (20, 15.5), (30, 25.5), (40, 35.5)]
    assert got["learner_step/loss_avg"] == [(70, 5.5), (140, 15.5), (210, 25.5), (280, 35.5)]
    assert got["learner_iter/aux_avg"] == [(10, 107.5), (20, 117.5), (30, 127.5), (40, 137.5)]
    assert got["learner_step/aux_avg"] == [(70, 107.5), (140, 117.5), (210, 127.5), (280, 137.5)]
    assert got["learner_iter/cur_lr_avg"] == [(s, F32(0.25)) for s in (10, 20, 30, 40)]
    for tag in ("throughput_iter/iters_per_sec", "throughput_iter/env_steps_per_sec"):
        assert [s for s, _ in got[tag]] == [10, 20, 30, 40] and all(v > 0 for _, v in got[tag])
    assert [s for s, _ in got["throughput_step/env_steps_per_sec"]] == [70, 140, 210, 280]


def test_table_text_and_never_reported_key(tmp_path):
    _, records = make(tmp_path)
    texts = tables(records)
    assert len(texts) == 4
    first = parse_tables(texts[0])
    assert list(first) == [  # grouped: the learner's keys, then throughput and the time it leaves out
        "train_iter", "envstep", "loss_avg", "aux_avg", "never_avg", "cur_lr_avg", "throughput/iters_per_sec",
        "throughput/env_steps_per_sec", "time/eval_s", "time/checkpoint_s",
    ]
    assert (first["train_iter"], first["envstep"]) == ("10", "70")
    assert (first["loss_avg"], first["aux_avg"], first["never_avg"], first["cur_lr_avg"]) == ("5.5", "107.5", "-", "0.25")
    assert float(first["throughput/iters_per_sec"]) > 0 and float(first["throughput/env_steps_per_sec"]) > 0
    last = parse_tables(texts[-1])
    assert (last["train_iter"], last["loss_avg"], last["aux_avg"], last["never_avg"]) == ("40", "35.5", "137.5", "-")

    never = [w for w in warnings_of(records) if "'never'" in w]
    assert len(never) == 1  # once, at the second log, not repeated at the 3rd and 4th
    assert "declared monitor key 'never' has never been reported after 20 iterations" in never[0]
    assert "_monitor_vars_learn()" in never[0] and "declared by PeriodicPolicy._monitor_vars_learn()" in never[0]
    assert not [w for w in warnings_of(records) if "'aux'" in w or "'loss'" in w]


def test_never_reported_warns_at_end_when_only_one_log(tmp_path):
    _, records = make(tmp_path, iters=15)
    never = [w for w in warnings_of(records) if "'never'" in w]
    assert len(never) == 1 and "after 15 iterations" in never[0]


def test_no_warning_for_a_key_seen_before_the_second_log(tmp_path):
    # aux every 5 iterations, log every 3: aux is missing at the first log (iteration 3), not a problem
    _, records = make(tmp_path, iters=12, log_freq=3, monitor_window=3)
    assert not [w for w in warnings_of(records) if "'aux'" in w]
    first = parse_tables(tables(records)[0])
    assert first["aux_avg"] == "-"


def test_empty_window_gets_dash_and_no_point(tmp_path):
    # aux every 5 iterations, a window of 2 and logs at 12 and 24: the windows (11-12, 23-24) never hold
    # an aux value -> '-' and no point at all (never a fabricated 0)
    _, records = make(tmp_path, iters=24, log_freq=12, monitor_window=2)
    got = read_scalars(tmp_path / "tb")
    assert "learner_iter/aux_avg" not in got and "learner_step/aux_avg" not in got
    assert [parse_tables(t)["aux_avg"] for t in tables(records)] == ["-", "-"]
    assert got["learner_iter/loss_avg"] == [(12, 11.5), (24, 23.5)]


def test_per_key_windows(tmp_path):
    make(tmp_path, iters=20, monitor_windows={"aux": 20})
    got = read_scalars(tmp_path / "tb")
    assert got["learner_iter/aux_avg"] == [(10, 107.5), (20, 112.5)]  # (105+110+115+120)/4 at 20


def test_nonfinite_values_are_counted_not_averaged(tmp_path):
    _, records = make(tmp_path, iters=20, policy_cfg={"nan_at": [3]})
    got = read_scalars(tmp_path / "tb")
    assert got["learner_iter/loss_avg"] == [(10, F32((55 - 3) / 9)), (20, 15.5)]
    assert got["learner_iter/loss_nonfinite"] == [(10, 1.0)]
    assert got["learner_step/loss_nonfinite"] == [(70, 1.0)]
    texts = tables(records)
    first, second = parse_tables(texts[0]), parse_tables(texts[1])
    assert first["loss_avg"] == format_value((55 - 3) / 9) and first["loss_nonfinite"] == "1"
    assert "loss_nonfinite" not in second
    nonfinite = [w for w in warnings_of(records) if "non-finite" in w]
    assert nonfinite == ["non-finite values (NaN/inf) in the window, excluded from the averages: loss: 1"]


def test_undeclared_key_is_shown_and_written(tmp_path):
    _, records = make(tmp_path, iters=20, policy_cfg={"extra": True})
    got = read_scalars(tmp_path / "tb")
    assert got["learner_iter/surprise_avg"] == [(10, 11.0), (20, 31.0)]
    assert parse_tables(tables(records)[0])["surprise_avg"] == "11"
    undeclared = [w for w in warnings_of(records) if "'surprise'" in w]
    assert len(undeclared) == 1 and "add it to PeriodicPolicy._monitor_vars_learn()" in undeclared[0]


def test_grouped_keys_go_to_their_group(tmp_path):
    assert tb_tags("loss_avg") == ("learner_iter/loss_avg", "learner_step/loss_avg")
    assert tb_tags("collector/episode_return_avg") == ("collector_iter/episode_return_avg", "collector_step/episode_return_avg")
    learner = BaseLearner(PeriodicPolicy(None, None, None), dict(log_freq=2), work_dir=tmp_path)
    learner.declare_monitor_vars(["collector/episode_return"])
    learner.register_hook(LogShowHook(), "BELOW_NORMAL")
    learner.train(None, envstep=50)
    learner.record({"collector/episode_return": -3.0})
    learner.train(None, envstep=100)
    learner.call_hook("after_run")
    got = read_scalars(tmp_path / "tb")
    assert got["collector_iter/episode_return_avg"] == [(2, -3.0)]
    assert got["collector_step/episode_return_avg"] == [(100, -3.0)]


def test_tables_wrap_to_the_width(tmp_path):
    columns = [(f"column_number_{i}_avg", f"{i}.25") for i in range(12)]
    text = horizontal_tables([("learner", columns)], width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(lines) > 2 and len(lines) % 2 == 0  # several blocks of two lines
    cells = parse_tables("train_iter 1  envstep 2\n" + text)
    assert list(cells)[2:] == [name for name, _ in columns] and cells["column_number_7_avg"] == "7.25"
    # one column wider than the terminal still gets printed, alone
    wide = horizontal_tables([("learner", [("x" * 100, "1"), ("y", "2")])], width=40)
    assert parse_tables("train_iter 1  envstep 2\n" + wide) == {"train_iter": "1", "envstep": "2", "x" * 100: "1", "y": "2"}

    # a group that fits a row of its own is not split across two rows; one wider than any row still is
    blocks = [("learner", [("a_avg", "1"), ("b_avg", "2")]), ("time", [("eval_s", "0.5"), ("checkpoint_s", "0")])]
    assert horizontal_tables(blocks, width=40).splitlines() == [
        "learner  a_avg  b_avg",
        "             1      2",
        "time     eval_s  checkpoint_s",
        "            0.5             0",
    ]
    assert horizontal_tables(blocks, width=60).splitlines()[0] == "learner  a_avg  b_avg | time  eval_s  checkpoint_s"
    split = horizontal_tables([("learner", [("a_avg", "1")]), ("other", [(f"c{i}_avg", "3") for i in range(9)])], 40)
    assert split.splitlines()[0] == "learner  a_avg | other  c0_avg  c1_avg"

    _, records = make(tmp_path, iters=10, width=60)
    text = tables(records)[0]
    assert max(len(line) for line in text.splitlines()[1:]) <= 60
    assert parse_tables(text)["loss_avg"] == "5.5"


_NAME = st.from_regex(r"[A-Za-z0-9_.\-]{1,16}( [A-Za-z0-9_.\-]{1,8})?", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(
    scalars=st.dictionaries(
        st.tuples(st.sampled_from(["", "collector/", "evaluator/", "throughput/", "custom/"]), _NAME).map("".join),
        st.one_of(st.none(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True)),
        max_size=12,
    ),
    width=st.integers(20, 200),
)
def test_any_table_reads_back_and_fits_where_it_can(scalars, width):
    """Property: every column of any write reads back by its full name with format_value's text, and a
    line is wider than ``width`` only where one label and one column alone are."""
    from rlearn.writers import TableWriter

    writer = TableWriter(logging.getLogger("rlearn.test.table.property"), width=width)
    text = writer.render(scalars, 3, 4)
    cells = parse_tables(text)
    assert cells.pop("train_iter") == "3" and cells.pop("envstep") == "4"
    assert cells == {name: format_value(value) for name, value in scalars.items()}
    label = max((len(name.partition("/")[0]) if "/" in name else len("learner") for name in scalars), default=0)
    widest = max((max(len(n.partition("/")[2] or n), len(format_value(v))) for n, v in scalars.items()), default=0)
    assert max(len(line) for line in text.splitlines()[1:] or [""]) <= max(width, label + 2 + widest)


def test_terminal_width_is_used_by_default(tmp_path, monkeypatch):
    import os
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(120, 24): os.terminal_size((50, 20)))
    _, records = make(tmp_path, iters=10, hook=LogShowHook())
    assert max(len(line) for line in tables(records)[0].splitlines()[1:]) <= 50


def test_freq_argument_overrides_log_freq_and_validation(tmp_path):
    _, records = make(tmp_path, iters=12, hook=LogShowHook(freq=4, width=300))
    assert [parse_tables(t)["train_iter"] for t in tables(records)] == ["4", "8", "12"]
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="freq"):
            LogShowHook(freq=bad)


def test_no_tensorboard_without_work_dir_or_on_other_ranks(tmp_path):
    learner = BaseLearner(PeriodicPolicy(None, None, None), dict(log_freq=1), work_dir=tmp_path, rank=1, world_size=2)
    hook = LogShowHook()
    learner.register_hook(hook, "BELOW_NORMAL")
    learner.train(None, envstep=1)
    assert learner.writers == [] and hook.logs == 0 and not (tmp_path / "tb").exists()


def test_format_value():
    assert [format_value(v) for v in (12.345678, -1234.5678, 99999.4, 0.000123456, np.float32(0.25))] == [
        "12.346", "-1234.6", "99999", "0.00012346", "0.25"
    ]  # 5 significant digits, no exponent from 1e5 to 1e15
    assert [format_value(v) for v in (None, 3, 0.1 + 0.2, 1234567.0, math.nan, -math.inf, 1e-7)] == [
        "-", "3", "0.3", "1234567", "nan", "-inf", "1e-07"
    ]


# ------------------------------------------------------------------ never-reported: when, and whose key
class Every16Policy(PeriodicPolicy):
    """``rare`` every 16 iterations (PPG's auxiliary phase with n_pi=16), ``ghost`` declared, never sent."""

    def _forward_learn(self, data):
        self.n += 1
        return {"loss": float(self.n), **({"rare": float(self.n)} if self.n % 16 == 0 else {})}

    def _monitor_vars_learn(self):
        return ["loss", "rare", "ghost"]


def run_every16(tmp_path, iters):
    logger = logging.getLogger(f"rlearn.test.logshow.every16.{tmp_path.name}.{iters}")
    logger.setLevel(logging.INFO)
    handler = ListHandler()
    logger.addHandler(handler)
    learner = BaseLearner(Every16Policy(None, None, None),
                          dict(log_freq=10, monitor_windows={"rare": 16, "ghost": 16, "collector/episode_return": 16}),
                          work_dir=tmp_path, logger=logger)
    learner.declare_monitor_vars(["collector/episode_return"])
    learner.register_hook(LogShowHook(width=400), "BELOW_NORMAL")
    learner.call_hook("before_run")
    for i in range(1, iters + 1):
        learner.train(None, envstep=i)
    learner.call_hook("after_run")
    return [w for w in warnings_of(handler.records) if "never been reported" in w]


def test_never_reported_waits_for_the_keys_window(tmp_path):
    # 15 iterations, one log at 10: the old rule warned at the end for every key without a value; no key
    # with a 16-iteration window could have been reported yet
    assert run_every16(tmp_path, 15) == []
    # 40 iterations: 'rare' came at 16 and 32, never warned; 'ghost' and the pipeline's key are warned at
    # the second log (20 >= their window of 16), once
    warned = run_every16(tmp_path, 40)
    assert len(warned) == 2
    ghost, episode = warned
    assert "'ghost' has never been reported after 20 iterations" in ghost
    assert "declared by Every16Policy._monitor_vars_learn()" in ghost
    assert "'collector/episode_return' has never been reported after 20 iterations" in episode
    assert "declared by learner.declare_monitor_vars()" in episode
    assert "_monitor_vars_learn" not in episode and "_monitor_vars_collect" not in episode


def test_never_reported_at_the_end_once_the_window_elapsed(tmp_path):
    warned = run_every16(tmp_path, 17)  # one log (10), the run ends at 17 >= 16
    assert [w.split(" has never")[0] for w in warned] == [
        "declared monitor key 'ghost'", "declared monitor key 'collector/episode_return'"
    ]


# -------------------------------------------------------------------------------------- the final log
class CountingPolicy(PeriodicPolicy):
    """Reports ``value`` = the iteration number (1, 2, 3...)."""

    def _forward_learn(self, data):
        self.n += 1
        return {"value": float(self.n)}

    def _monitor_vars_learn(self):
        return ["value"]


def test_every_log_including_the_final_one_is_the_exact_window_mean(tmp_path):
    learner = BaseLearner(CountingPolicy(None, None, None), dict(log_freq=5, monitor_window=7), work_dir=tmp_path)
    hook = LogShowHook(width=400)
    learner.register_hook(hook, "BELOW_NORMAL")
    learner.call_hook("before_run")
    for i in range(1, 64):
        learner.train(None, envstep=10 * i)
    hook.final_log(learner)  # what the run's _final_log calls after the loop (63 % 5 != 0)
    learner.call_hook("after_run")
    got = read_scalars(tmp_path / "tb")
    logs = list(range(5, 64, 5)) + [63]
    want = [sum(range(max(1, t - 6), t + 1)) / (t - max(1, t - 6) + 1) for t in logs]
    assert want[-1] == 60.0
    assert got["learner_iter/value_avg"] == [(t, F32(w)) for t, w in zip(logs, want)]
    assert got["learner_step/value_avg"] == [(10 * t, F32(w)) for t, w in zip(logs, want)]


def test_final_log_asks_for_the_window_ending_at_the_last_iteration(tmp_path):
    """What final_log hands to the metric path, checkable before the monitor supports ``end=``."""
    learner = BaseLearner(CountingPolicy(None, None, None), dict(log_freq=5, monitor_window=7), work_dir=tmp_path)
    hook = LogShowHook(width=400)
    learner.register_hook(hook, "BELOW_NORMAL")
    seen = []
    original = learner.log_metrics
    learner.log_metrics = lambda **kw: seen.append(kw["end"]) or original(**kw)
    for i in range(1, 4):
        learner.train(None, envstep=i)
    assert learner.last_tick() == 2 and learner.monitor.tick_count == 3
    values = hook.final_log(learner)
    assert seen == [2] and values["value_avg"] is not None and hook.logs == 1


def test_final_log_covers_exactly_its_window_after_the_loop(tmp_path):
    """A run that stops 2 iterations after a log (2000 -> 2001 in a real TD3 run): the final log's windows
    end at the last iteration and hold exactly their size, a longer per-key window included."""
    learner = BaseLearner(CountingPolicy(None, None, None), dict(log_freq=5, monitor_window=5,
                                                                  monitor_windows={"slow": 20}), work_dir=tmp_path)
    learner.declare_monitor_vars(["slow"])
    hook = LogShowHook(width=400)
    learner.register_hook(hook, "BELOW_NORMAL")
    learner.call_hook("before_run")
    for i in range(1, 13):
        learner.record({"slow": float(i)})
        learner.train(None, envstep=10 * i)
    before = learner.monitor.state_dict()
    values = hook.final_log(learner)  # what the run's _final_log calls after the loop (12 % 5 != 0)
    assert values["value_avg"] == 10.0  # iterations 8..12: the whole 5-iteration window
    assert values["slow_avg"] == pytest.approx(sum(range(1, 13)) / 12)  # its own 20-iteration window
    assert learner.monitor.state_dict() == before  # logging changes no window
    learner.call_hook("after_run")
    got = read_scalars(tmp_path / "tb")
    assert got["learner_iter/value_avg"] == [(5, 3.0), (10, 8.0), (12, 10.0)]


class FakeClock:
    """perf_counter_ns stand-in advanced by hand."""

    def __init__(self):
        self.now = 10**9

    def __call__(self):
        return self.now


def test_throughput_is_over_train_time_and_traced_at_the_interval_start(tmp_path, monkeypatch):
    """Evaluation and checkpoint time between two logs are left out of iters/env steps per second; the
    trace counters carry the same names and values, stamped at the start of the interval they measure."""
    import json

    from rlearn import trace
    from rlearn.hooks import log_show
    from rlearn.trace.recorder import records_path

    clock = FakeClock()
    monkeypatch.setattr(log_show, "MONOTONIC_CLOCK", clock)
    monkeypatch.setattr("rlearn.trace.recorder.MONOTONIC_CLOCK", lambda: clock.now + 10**12)  # records "later"
    trace.enable(tmp_path / "run")
    try:
        learner = BaseLearner(CountingPolicy(None, None, None), dict(log_freq=4), work_dir=tmp_path)
        learner.register_hook(LogShowHook(width=400), "BELOW_NORMAL")
        learner.call_hook("before_run")
        start = clock.now
        seen = []
        for i in range(1, 9):
            clock.now += 250_000_000  # 0.25 s of training per iteration
            if i == 6:  # an evaluation of 3 s and a checkpoint of 2 s inside the second interval
                learner.call_hook("before_eval")
                clock.now += 3 * 10**9
                learner.call_hook("after_eval")
                learner.call_hook("before_save_checkpoint", {})
                clock.now += 2 * 10**9
                learner.call_hook("before_collect")
            learner.train(None, envstep=10 * i)
            seen.append(clock.now)
        learner.call_hook("after_run")
    finally:
        trace.disable()
    got = read_scalars(tmp_path / "tb")
    assert got["throughput_iter/iters_per_sec"] == [(4, 4.0), (8, 4.0)]  # 4 iterations in 1 s of train time
    assert got["throughput_iter/env_steps_per_sec"] == [(4, 40.0), (8, 40.0)]
    assert got["time_iter/eval_s"] == [(4, 0.0), (8, 3.0)] and got["time_iter/checkpoint_s"] == [(4, 0.0), (8, 2.0)]
    lines = [json.loads(line) for line in records_path(tmp_path / "run", 0).read_text().splitlines()]
    counters = [(c["name"], c["t"], c["value"]) for c in lines if c["type"] == "counter"]
    assert counters == [
        ("throughput/iters_per_sec", start, 4.0), ("throughput/env_steps_per_sec", start, 40.0),
        ("throughput/iters_per_sec", seen[3], 4.0), ("throughput/env_steps_per_sec", seen[3], 40.0),
    ]


class SlowRows(Writer):
    """Keeps every write; each one takes ``cost_ns`` on the fake clock (a slow disk or tracking service)."""

    def __init__(self, clock, cost_ns):
        self.clock, self.cost_ns, self.rows = clock, cost_ns, []

    def write_scalars(self, scalars, step_iter, step_env):
        self.clock.now += self.cost_ns
        self.rows.append((step_iter, step_env, dict(scalars)))

    def write_text(self, tag, text, step_iter):
        self.clock.now += self.cost_ns


def _clocked_learner(tmp_path, monkeypatch, log_cost_ns=0):
    from rlearn.hooks import log_show

    clock = FakeClock()
    monkeypatch.setattr(log_show, "MONOTONIC_CLOCK", clock)
    rows = SlowRows(clock, log_cost_ns)
    learner = BaseLearner(CountingPolicy(None, None, None), dict(log_freq=4), work_dir=tmp_path, writers=[rows])
    hook = LogShowHook()
    learner.register_hook(hook, "BELOW_NORMAL")
    learner.call_hook("before_run")
    return learner, hook, clock, rows


def _evaluate(learner, clock, play_s, best_s):
    """What EvalHook.evaluate does to the clock: episodes, its result to the writers, a best.pt save."""
    learner.call_hook("before_eval")
    clock.now += int(play_s * 1e9)
    learner.write_scalars({"evaluator/episode_return_mean": -1.0})
    learner.call_hook("before_save_checkpoint", {})
    clock.now += int(best_s * 1e9)
    learner.call_hook("after_eval")


def _logs(rows):
    return [(it, env, {k: v for k, v in values.items() if k.startswith(("throughput/", "time/"))})
            for it, env, values in rows.rows if "value_avg" in values]


def test_evaluation_checkpoint_and_logging_do_not_lower_the_throughput(tmp_path, monkeypatch):
    """Exact numbers on a fake clock: 0.25 s per iteration; an evaluation (3 s of episodes, its result
    written, a 1 s best.pt), a 2 s checkpoint and writing every log (0.5 s per write) all fall between two
    logs; the throughput is still 4 iterations per second, and the time left out is shown beside it."""
    learner, hook, clock, rows = _clocked_learner(tmp_path, monkeypatch, log_cost_ns=500_000_000)
    for i in range(1, 9):
        clock.now += 250_000_000
        if i == 6:
            _evaluate(learner, clock, play_s=3, best_s=1)
        if i == 7:
            learner.call_hook("before_save_checkpoint", {})
            clock.now += 2 * 10**9
            learner.call_hook("before_collect")
        learner.train(None, envstep=10 * i)
    assert _logs(rows) == [
        (4, 40, {"throughput/iters_per_sec": 4.0, "throughput/env_steps_per_sec": 40.0, "time/eval_s": 0.0,
                 "time/checkpoint_s": 0.0}),
        (8, 80, {"throughput/iters_per_sec": 4.0, "throughput/env_steps_per_sec": 40.0, "time/eval_s": 4.5,
                 "time/checkpoint_s": 2.0}),
    ]
    assert [it for it, _, values in rows.rows if "evaluator/episode_return_mean" in values] == [5]


def test_a_checkpoint_right_before_an_evaluation_is_counted_as_checkpoint_time(tmp_path, monkeypatch):
    learner, hook, clock, rows = _clocked_learner(tmp_path, monkeypatch)
    for i in range(1, 5):
        clock.now += 250_000_000
        if i == 3:
            learner.call_hook("before_save_checkpoint", {})  # in after_iter; the evaluation follows at once
            clock.now += 2 * 10**9
            _evaluate(learner, clock, play_s=3, best_s=0)
        learner.train(None, envstep=10 * i)
    assert _logs(rows)[0][2] == {"throughput/iters_per_sec": 4.0, "throughput/env_steps_per_sec": 40.0,
                                 "time/eval_s": 3.0, "time/checkpoint_s": 2.0}


def test_a_run_ending_on_a_log_iteration_writes_no_second_log(tmp_path, monkeypatch):
    """The final log after the loop (and the final evaluation): none when the last iteration was logged
    already; otherwise one, over the iterations since that log and their train time only."""
    learner, hook, clock, rows = _clocked_learner(tmp_path, monkeypatch)
    for i in range(1, 9):
        clock.now += 250_000_000
        learner.train(None, envstep=10 * i)
    _evaluate(learner, clock, play_s=3, best_s=1)  # the run's final evaluation
    assert hook.final_log(learner) is None
    assert [it for it, _, _ in _logs(rows)] == [4, 8] and hook.logs == 2
    clock.now += 250_000_000
    learner.train(None, envstep=90)  # one more iteration: the run ends at 9
    _evaluate(learner, clock, play_s=3, best_s=1)
    values = hook.final_log(learner)
    assert values["value_avg"] == 7.5  # its own window of 4 iterations, 6..9
    assert _logs(rows)[-1] == (9, 90, {"throughput/iters_per_sec": 4.0, "throughput/env_steps_per_sec": 40.0,
                                       "time/eval_s": 8.0, "time/checkpoint_s": 0.0})
    assert hook.final_log(learner) is None  # called again: still nothing new
    assert [it for it, _, _ in _logs(rows)] == [4, 8, 9] and hook.logs == 3


def test_parse_log_tables_reads_every_table_of_a_log_file(tmp_path):
    """A log file mixes tables with other records (prefixed lines); every table reads back in order."""
    from rlearn.writers import TableWriter
    from rlearn.writers.table import parse_log_tables

    logger = logging.getLogger(f"rlearn.test.logshow.file.{tmp_path.name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(tmp_path / "run.log")
    handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    logger.addHandler(handler)
    writer = TableWriter(logger, width=60)
    writer.write_scalars({"loss_avg": 1.5, "collector/episode_return_avg": -3.0, "throughput/iters_per_sec": 9.0}, 5, 50)
    logger.warning("something  else happened")
    writer.write_scalars({"evaluator/episode_return_mean": -2.0}, 5, 50)
    writer.write_scalars({"loss_avg": None, "collector/episode_return_avg": -1.0, "throughput/iters_per_sec": 8.0}, 10, 100)
    handler.close()
    assert parse_log_tables((tmp_path / "run.log").read_text()) == [
        {"train_iter": "5", "envstep": "50", "loss_avg": "1.5", "collector/episode_return_avg": "-3",
         "throughput/iters_per_sec": "9"},
        {"train_iter": "5", "envstep": "50", "evaluator/episode_return_mean": "-2"},
        {"train_iter": "10", "envstep": "100", "loss_avg": "-", "collector/episode_return_avg": "-1",
         "throughput/iters_per_sec": "8"},
    ]
