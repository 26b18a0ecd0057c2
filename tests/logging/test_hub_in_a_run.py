"""MessageHub.update_scalar from a user hook lands in the run's windows: exact window means in the table,
metrics.jsonl and TensorBoard (both axes), '-' / no point where the window is empty; a statistic registered
with HistoryBuffer.register_statistics used from learner.log_processor.custom_cfg, in process and in a real
``rlearn train`` run."""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from policies.base import Policy
from rlearn.hooks import Hook, LogShowHook
from rlearn.learner import BaseLearner
from rlearn.logging import HistoryBuffer, MessageHub
from rlearn.writers.table import parse_log_tables, parse_table

ROOT = Path(__file__).resolve().parents[2]


class CountingPolicy(Policy):
    """``loss`` = n at the n-th iteration."""

    def _init_learn(self):
        self.net = torch.nn.Linear(1, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.5)
        self.n = 0

    def _forward_learn(self, data):
        self.n += 1
        return {"loss": float(self.n)}

    def _monitor_vars_learn(self):
        return ["loss"]

    def _forward_collect(self, obs, envstep):
        return {"action": np.zeros(len(obs))}

    def _forward_eval(self, obs):
        return np.zeros(len(obs))

    def optimizers(self):
        return {"opt": self.opt}


class GradNormHook(Hook):
    """A user's hook: every 3rd iteration it records ``grad_norm`` = the iteration number through the hub,
    and reads the run's history of ``loss`` back."""

    def __init__(self):
        self.seen = []

    def after_iter(self, learner):
        hub = MessageHub.get_current_instance()
        if learner.train_iter % 3 == 0:
            hub.update_scalar("grad_norm", torch.tensor(float(learner.train_iter)))
        self.seen.append(hub.get_scalar("loss").mean(2))


class ListHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


def run(tmp_path, iters, custom_cfg=(), **cfg):
    logger = logging.getLogger(f"rlearn.test.hub.{tmp_path.name}")
    logger.setLevel(logging.INFO)
    handler = ListHandler()
    logger.addHandler(handler)
    learner = BaseLearner(CountingPolicy(None, None, None),
                          dict(cfg, log_processor=dict(custom_cfg=list(custom_cfg))), work_dir=tmp_path, logger=logger)
    hook = GradNormHook()
    learner.register_hook(hook)  # NORMAL: before LogShowHook (BELOW_NORMAL), so its value is in this log
    learner.register_hook(LogShowHook(width=400), "BELOW_NORMAL")
    learner.call_hook("before_run")
    for i in range(1, iters + 1):
        learner.train(None, envstep=7 * i)
    learner.call_hook("after_run")
    tables = [parse_table(r.getMessage()) for r in handler.records if r.getMessage().startswith("train_iter")]
    warnings = [r.getMessage() for r in handler.records if r.levelno == logging.WARNING]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    tb = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    return learner, hook, tables, warnings, rows, tb


@pytest.mark.parametrize("log_freq, window, expected", [
    (6, 6, {6: 4.5, 12: 10.5}),               # iterations 1-6 hold 3 and 6, 7-12 hold 9 and 12
    (4, 2, {4: 3.0, 8: None, 12: 12.0, 16: 15.0}),  # iterations 7-8 hold none: '-', absent, no point
])
def test_update_scalar_from_a_hook_every_third_iteration(tmp_path, log_freq, window, expected):
    learner, hook, tables, warnings, rows, tb = run(tmp_path, max(expected), log_freq=log_freq, monitor_window=window)
    logs = sorted(expected)
    assert [t["train_iter"] for t in tables] == [str(i) for i in logs]
    assert [t["grad_norm_avg"] for t in tables] == ["-" if expected[i] is None else f"{expected[i]:.4g}" for i in logs]
    assert [r["train_iter"] for r in rows] == logs
    assert [r.get("grad_norm_avg") for r in rows] == [expected[i] for i in logs]
    assert all("grad_norm_avg" not in r for r in rows if expected[r["train_iter"]] is None)
    points = [(i, expected[i]) for i in logs if expected[i] is not None]
    assert tb["learner_iter/grad_norm_avg"] == points
    assert tb["learner_step/grad_norm_avg"] == [(7 * i, v) for i, v in points]
    # the policy's key beside it, from the same store; the hook read its history back as a HistoryBuffer
    assert [r["loss_avg"] for r in rows] == [sum(range(i - window + 1, i + 1)) / window for i in logs]
    assert hook.seen[:3] == [1.0, 1.5, 2.5]
    # not declared: recorded and shown, with one warning saying where to declare it
    assert [w for w in warnings if "grad_norm" in w] == [
        "monitor key 'grad_norm' is not declared: it is recorded and shown, but add it to learner.declare_monitor_vars()"]
    assert learner.message_hub.get_info("train_iter") == max(expected)


def test_update_scalar_is_saved_with_the_windows_and_resumes(tmp_path):
    learner, *_ = run(tmp_path, 5, log_freq=5, monitor_window=6)
    fresh = BaseLearner(CountingPolicy(None, None, None), dict(log_freq=100, monitor_window=6), writers=[])
    fresh.monitor.load_state_dict(learner.monitor.state_dict())  # what a checkpoint carries
    assert fresh.message_hub.get_scalar("grad_norm").data[0].tolist() == [3.0]
    fresh.message_hub.update_scalar("grad_norm", 8.0)
    assert fresh.monitor.avg("grad_norm") == 5.5


@pytest.fixture
def registered_statistics():
    saved = dict(HistoryBuffer._statistics_methods)
    yield
    HistoryBuffer._statistics_methods.clear()
    HistoryBuffer._statistics_methods.update(saved)


def test_registered_statistic_in_custom_cfg(tmp_path, registered_statistics):
    @HistoryBuffer.register_statistics
    def weighted_mean(self, window_size, weight):
        assert len(weight) == window_size
        return (self._log_history[-window_size:] * np.array(weight)).sum() / self._count_history[-window_size:].sum()

    @HistoryBuffer.register_statistics
    def median(self):
        return float(np.median(self._log_history))

    cfg = [dict(data_src="loss", method_name="weighted_mean", log_name="loss_wmean", window_size=4, weight=[1, 2, 3, 4]),
           dict(data_src="loss", method_name="median")]
    *_, rows, tb = run(tmp_path, 12, cfg, log_freq=4, monitor_window=3)
    for row in rows:
        i = row["train_iter"]
        assert row["loss_median"] == statistics.median([i - 2, i - 1, i])  # replaces loss_avg, over its 3 iterations
        assert row["loss_wmean"] == sum(w * v for w, v in zip([1, 2, 3, 4], range(i - 3, i + 1))) / 4  # over the counts, as written
        assert "loss_avg" not in row
    assert tb["learner_iter/loss_wmean"] == [(i, r["loss_wmean"]) for i, r in zip((4, 8, 12), rows)]


def test_unknown_statistic_lists_the_registered_ones(registered_statistics):
    from rlearn.learner import LearnerConfigError

    with pytest.raises(LearnerConfigError, match=r"learner.log_processor.custom_cfg\[0\].*'p95' is unknown; the "
                                                  r"registered statistics are mean, min, max, current, count, std"):
        BaseLearner(CountingPolicy(None, None, None), dict(log_processor=dict(custom_cfg=[
            dict(data_src="loss", method_name="p95")])), writers=[])


CONFIG = '''
import numpy as np
from rlearn.logging import HistoryBuffer

@HistoryBuffer.register_statistics
def spread(self, window_size):
    """max - min of the last window_size values"""
    values = self._log_history[-window_size:]
    return float(values.max() - values.min())

@HistoryBuffer.register_statistics
def total(self):
    return float(self._log_history.sum())

config = dict(
    exp_name="registered", seed=0, custom_imports=[{example!r}],
    env=dict(id="CartPole-v1", num_envs=2),
    policy=dict(type="reinforce_demo", rollout_steps=16, hidden=8, baseline_every=3),
    train=dict(max_env_steps=384),
    learner=dict(log_freq=4, log_processor=dict(custom_cfg=[
        dict(data_src="policy_loss", method_name="spread", log_name="policy_loss_spread", window_size=4),
        dict(data_src="policy_loss", method_name="total", log_name="policy_loss_total"),
        dict(data_src="policy_loss", method_name="min", log_name="policy_loss_min"),
        dict(data_src="policy_loss", method_name="max", log_name="policy_loss_max"),
        dict(data_src="policy_loss", method_name="count", log_name="policy_loss_n"),
    ])),
    eval=dict(freq=100000, episodes=1, num_envs=1, stop_value=None),
    checkpoint=dict(freq=100),
)
'''


def test_registered_statistic_in_a_real_train_run(tmp_path):
    config = tmp_path / "registered.py"
    config.write_text(CONFIG.format(example=str(ROOT / "examples" / "custom_policy.py")))
    work = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "rlearn", "train", str(config), "--work-dir", str(work)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "RLEARN_NO_PROGRESS": "1"})
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (work / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in rows if "policy_loss_avg" in r]
    assert [r["train_iter"] for r in logged] == [4, 8, 12]
    for row in logged:  # 2 envs x 16 steps per iteration: 12 iterations, a log every 4, window 4
        assert row["policy_loss_n"] == 4
        assert row["policy_loss_spread"] == row["policy_loss_max"] - row["policy_loss_min"] > 0
        assert row["policy_loss_total"] == pytest.approx(4 * row["policy_loss_avg"], rel=1e-12)
    assert "policy_loss_spread" in parse_log_tables((work / "registered.log").read_text())[0]


def test_the_documented_p95_example(registered_statistics):
    """docs/logging.md: a statistic without a window_size argument, used from an entry with window_size."""
    from rlearn.logging import LogProcessor
    from rlearn.monitor import TickMonitor

    @HistoryBuffer.register_statistics
    def p95(self):
        return float(np.percentile(self._log_history, 95))

    processor = LogProcessor(custom_cfg=[dict(data_src="critic_loss", method_name="p95", log_name="critic_loss_p95",
                                              window_size=100)])
    monitor = TickMonitor(window_size=10)
    processor.prepare(monitor)
    for i in range(150):
        monitor.update({"critic_loss": float(i)})
        monitor.tick()
    out = processor.values(processor.window_stats(monitor, ["critic_loss"], end=149))
    assert out == {"critic_loss_avg": 144.5, "critic_loss_p95": float(np.percentile(np.arange(50, 150), 95))}


def test_tensors_given_to_the_hub_in_a_run_reach_the_host_in_one_copy(monkeypatch):
    """In a run the hub hands its values to the monitor unconverted: accelerator tensors of one
    ``update_scalars`` are copied to the host together (one copy per device), not one ``item()`` each."""
    from rlearn.monitor import TickMonitor, scalars

    monkeypatch.setattr(scalars, "CPU_DIRECT", False)  # CPU tensors take the accelerator path
    copies = []
    real = scalars.batched_to_floats
    monkeypatch.setattr(scalars, "batched_to_floats", lambda tensors: copies.append(len(tensors)) or real(tensors))
    monitor = TickMonitor()
    hub = MessageHub("tensors_in_a_run")
    hub.attach(monitor)
    hub.update_scalars({"a": torch.tensor(1.5), "b": torch.tensor(2.5), "c": {"value": torch.tensor(3.5), "count": 1}})
    assert copies == [3]
    assert [monitor.last(key) for key in "abc"] == [1.5, 2.5, 3.5]
    with pytest.raises(TypeError, match="'d'"):  # a bad value is still refused, naming its key, before recording
        hub.update_scalars({"e": 1.0, "d": torch.ones(2)})
    assert monitor.last("e") is None
