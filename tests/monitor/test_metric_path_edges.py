"""Edges of the metric path: one exact summation for every key, keys that cannot be shown (newlines,
reserved column names, colliding log names) refused where they enter, checkpoints taken while another
thread records, and keys declared as irregular (reported when it happens)."""

from __future__ import annotations

import json
import logging
import threading
from fractions import Fraction

import numpy as np
import pytest
import torch

from policies.base import Policy
from rlearn.hooks import LogShowHook
from rlearn.learner import BaseLearner, LearnerConfigError
from rlearn.logging import LogProcessor, LogProcessorConfigError, MessageHub
from rlearn.monitor import TickMonitor, irregular
from rlearn.writers import JsonlWriter


class ScriptPolicy(Policy):
    """Reports ``loss`` every iteration and whatever ``extra`` holds; declares ``declare``."""

    default_config = {"declare": ["loss", "aux"], "lr": 0.1}

    def _init_learn(self):
        self.net = torch.nn.Linear(2, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=self.cfg["lr"])
        self.extra = {}

    def _forward_learn(self, data):
        return {"loss": 1.0, **self.extra}

    def _monitor_vars_learn(self):
        return list(self.cfg["declare"])

    def _forward_collect(self, obs, envstep):
        return {"action": np.zeros(len(obs))}

    def _forward_eval(self, obs):
        return np.zeros(len(obs))

    def modules(self):
        return {"net": self.net}

    def optimizers(self):
        return {"opt": self.opt}


def make(cfg=None, policy_cfg=None, **kwargs):
    kwargs.setdefault("writers", [])
    return BaseLearner(ScriptPolicy(policy_cfg, None, None), cfg, logger=logging.getLogger("rlearn.test.edges"), **kwargs)


# ------------------------------------------------------------------------------------ one exact summation
@pytest.mark.parametrize("window", [3, 20, 50, 100, 1000])
def test_a_constant_value_averages_to_itself_exactly(window):
    """The mean of n copies of 0.0023 is 0.0023, at every tick and for both window ends (a naive running
    sum drifts to 0.002299999999999997)."""
    monitor = TickMonitor(window_size=window)
    for tick in range(2500):
        monitor.update({"cur_lr": 0.0023})
        assert monitor.window_stat("cur_lr").avg == 0.0023
        assert monitor.window_stat("cur_lr", end=tick - 1).avg in (None, 0.0023)
        assert monitor.avg("cur_lr") == 0.0023
        monitor.tick()


def test_window_means_are_correctly_rounded():
    """Against exact rational arithmetic: every window mean is the float nearest the exact mean."""
    rng = np.random.default_rng(0)
    values = (rng.standard_normal(3000) * 10.0 ** rng.integers(-3, 4, 3000)).tolist()
    monitor = TickMonitor(window_size=37)
    for tick, value in enumerate(values):
        monitor.update({"x": value})
        window = values[max(0, tick - 36): tick + 1]
        assert monitor.window_stat("x").avg == float(sum(map(Fraction, window)) / len(window))
        monitor.tick()


def test_cur_lr_avg_in_metrics_jsonl_is_the_constant_lr(tmp_path):
    learner = make({"log_freq": 100, "monitor_window": 100}, {"lr": 0.0023},
                   writers=[JsonlWriter(tmp_path / "metrics.jsonl")])
    learner.register_hook(LogShowHook())
    for _ in range(300):
        learner.train(None)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["cur_lr_avg"] for row in rows] == [0.0023] * 3


# ------------------------------------------------------------------------------------ keys refused at entry
@pytest.mark.parametrize("key", ["a\nb", "loss\r", "tab\there", "nul\x00"])
def test_a_key_with_a_control_character_is_refused_where_it_enters(key):
    monitor = TickMonitor()
    monitor.update({"kept": 1.0})
    with pytest.raises(ValueError, match="control character"):
        monitor.update({"fine": 2.0, key: 1.0})
    assert monitor.keys() == ["kept"]  # nothing of the refused update was recorded, nothing before lost
    learner = make()
    with pytest.raises(ValueError, match="control character"):
        learner.record({key: 1.0})
    with pytest.raises(ValueError, match="control character"):
        learner.declare_monitor_vars([key])
    with pytest.raises(ValueError, match="control character"):
        learner.message_hub.update_scalar(key, 1.0)
    with pytest.raises(ValueError, match="control character"):
        MessageHub("edges").update_scalar(key, 1.0)
    learner.policy.extra = {key: 1.0}
    with pytest.raises(ValueError, match=r"ScriptPolicy._forward_learn .*control character"):
        learner.train(None)
    assert learner.train_iter == 0


@pytest.mark.parametrize("name", ["envstep", "train_iter", "time", "throughput/iters_per_sec", "time/eval_s"])
def test_a_reserved_column_name_is_refused_as_log_name(name):
    entry = dict(data_src="loss", method_name="max", log_name=name)
    with pytest.raises(LogProcessorConfigError, match=rf"custom_cfg\[0\].*{name}.* reserved"):
        LogProcessor(custom_cfg=[entry])
    with pytest.raises(LearnerConfigError, match=rf"learner.log_processor.custom_cfg\[0\].*{name}"):
        make({"log_processor": {"custom_cfg": [entry]}})


def test_a_log_name_with_a_newline_is_a_config_error():
    with pytest.raises(LearnerConfigError, match="control character"):
        make({"log_processor": {"custom_cfg": [dict(data_src="loss", method_name="max", log_name="a\nb")]}})


def test_a_log_name_colliding_with_a_declared_key_is_a_config_error_at_start_up():
    """``loss``'s max named ``aux_avg`` would overwrite ``aux``'s mean: refused when the learner is built."""
    entry = dict(data_src="loss", method_name="max", log_name="aux_avg")
    with pytest.raises(LearnerConfigError, match=r"custom_cfg\[0\].*'aux_avg'.*'aux'"):
        make({"log_processor": {"custom_cfg": [entry]}})
    lr_clash = dict(data_src="loss", method_name="max", log_name="cur_lr_avg")
    with pytest.raises(LearnerConfigError, match=r"'cur_lr_avg'.*'cur_lr'"):
        make({"log_processor": {"custom_cfg": [lr_clash]}})
    # a key a hook declares later: refused when it is declared, naming the entry
    learner = make({"log_processor": {"custom_cfg": [dict(data_src="loss", method_name="max", log_name="data_time_avg")]}})
    with pytest.raises(LearnerConfigError, match=r"custom_cfg\[0\].*'data_time_avg'.*'data_time'"):
        learner.declare_monitor_vars(["data_time"])
    assert "data_time" not in learner.monitor_vars()


# ------------------------------------------------------------------------------------ threads
def test_a_checkpoint_while_a_thread_records_new_keys():
    """A hook thread records new keys while the main thread takes checkpoints: every checkpoint is taken."""
    learner = make()
    learner.train(None)
    stop = threading.Event()

    def hammer():
        i = 0
        while not stop.is_set():  # a new key and a new info key each time, up to 3000, then new values
            learner.record({f"thread/k{i % 3000}": float(i)})
            learner.message_hub.update_info(f"info{i % 3000}", i)
            i += 1

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        for _ in range(60):
            state = learner.checkpoint_dict()
            assert state["learner"]["monitor"]["tick_count"] == 1
    finally:
        stop.set()
        thread.join()


# ------------------------------------------------------------------------------------ irregular keys
def _never_warnings(records):
    return [r.getMessage() for r in records if "never been reported" in r.getMessage()]


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_an_irregular_key_is_not_called_never_reported_but_a_missing_one_still_is():
    """``clip_norm`` (reported only when clipping happened) is declared irregular: no "never reported"
    warning; ``aux``, declared and never produced, is still warned about."""
    learner = make({"log_freq": 5, "monitor_window": 5}, {"declare": ["loss", "aux", irregular("clip_norm")]})
    learner.declare_monitor_vars(["hook/rare"], irregular=True)
    handler = _Records()
    learner.logger.addHandler(handler)
    try:
        learner.register_hook(LogShowHook())
        for _ in range(40):
            learner.train(None)
    finally:
        learner.logger.removeHandler(handler)
    warned = _never_warnings(handler.records)
    assert len(warned) == 1 and "'aux'" in warned[0]
    assert learner.monitor_vars() == ["loss", "aux", "clip_norm", "cur_lr", "hook/rare"]
    assert learner.irregular_keys() == {"clip_norm", "hook/rare"}


def test_a_key_called_never_reported_is_not_called_again_after_a_resume(tmp_path):
    """The keys already warned about travel in the learner's checkpoint: a resumed run does not repeat it."""
    learner = make({"log_freq": 5, "monitor_window": 5}, {"declare": ["loss", "aux"]})
    learner.register_hook(LogShowHook())
    for _ in range(15):
        learner.train(None)
    assert learner.metrics.warned_never == {"aux"}
    path = learner.save_checkpoint(tmp_path / "ckpt.pt")
    resumed = make({"log_freq": 5, "monitor_window": 5}, {"declare": ["loss", "aux"]})
    resumed.register_hook(LogShowHook())
    resumed.load_checkpoint(path)
    handler = _Records()
    resumed.logger.addHandler(handler)
    try:
        for _ in range(15):
            resumed.train(None)
    finally:
        resumed.logger.removeHandler(handler)
    assert _never_warnings(handler.records) == [] and resumed.metrics.warned_never == {"aux"}
