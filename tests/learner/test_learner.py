"""BaseLearner: config checks, the five steps of one iteration, cur_lr, record (undeclared / strict / bad
values), counters and the message hub."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from policies.base import Policy
from rlearn.hooks import Hook
from rlearn.config import ConfigError
from rlearn.learner import BaseLearner, LearnerConfigError
from rlearn.monitor import TickMonitor


class TinyPolicy(Policy):
    """Returns ``info`` from a script (one dict per iteration); declares ``loss`` and ``aux``."""

    default_config = {"optimizers": 1, "declare": ["loss", "aux"]}

    def _init_learn(self):
        self.net = torch.nn.Linear(2, 1)
        self.opts = {
            f"o{i}": torch.optim.SGD(self.net.parameters(), lr=0.1 * (i + 1)) for i in range(self.cfg["optimizers"])
        }
        self.script = []

    def _forward_learn(self, data):
        for optimizer in self.opts.values():
            optimizer.step()  # no gradients: changes nothing, but schedulers see the step was taken
        return self.script.pop(0) if self.script else {"loss": 1.0}

    def _monitor_vars_learn(self):
        return list(self.cfg["declare"])

    def _forward_collect(self, obs, envstep):
        return {"action": np.zeros(len(obs))}

    def _forward_eval(self, obs):
        return np.zeros(len(obs))

    def modules(self):
        return {"net": self.net}

    def optimizers(self):
        return self.opts


@pytest.fixture
def logger():
    log = logging.getLogger("rlearn.test.learner")
    log.setLevel(logging.INFO)
    return log


def make(cfg=None, policy_cfg=None, logger=None, **kwargs):
    return BaseLearner(TinyPolicy(policy_cfg, None, None), cfg, logger=logger, **kwargs)


# ------------------------------------------------------------------------------------------ config
def test_config_defaults_and_unknown_keys():
    learner = make()
    assert learner.cfg["log_freq"] == 100 and learner.cfg["monitor_window"] == 100 and learner.cfg["strict"] is False
    assert isinstance(learner.monitor, TickMonitor) and learner.monitor.window_size("anything") == 100
    assert make({"log_freq": 7}).monitor.window_size("loss") == 7  # window follows log_freq by default
    with pytest.raises(LearnerConfigError) as info:
        make({"log_frq": 10, "x": 1})
    assert str(info.value) == (
        "unknown config key 'learner.log_frq'; did you mean 'learner.log_freq'? (keys at 'learner': hooks, log_freq, "
        "log_processor, monitor_window, monitor_windows, strict, writers); also unknown: 'learner.x'"
    )
    assert isinstance(info.value, ConfigError)


@pytest.mark.parametrize(
    "cfg, message",
    [
        ({"log_freq": 0}, "config key 'learner.log_freq' must be >= 1, got 0"),
        ({"log_freq": 2.5}, "config key 'learner.log_freq' must be int >= 1, got float 2.5"),
        ({"monitor_window": True}, "config key 'learner.monitor_window' must be int >= 1 or None, got bool True"),
        ({"monitor_windows": {"aux": 0}}, "config key 'learner.monitor_windows.aux' must be >= 1, got 0"),
        ({"monitor_windows": [1]}, "config key 'learner.monitor_windows' must be dict of str -> int >= 1, got list [1]"),
        ({"strict": "yes"}, "config key 'learner.strict' must be bool, got str 'yes'"),
        ({"hooks": "LogShowHook"}, "config key 'learner.hooks' must be list of dict, got str 'LogShowHook'"),
    ],
)
def test_bad_config_values_name_the_key(cfg, message):
    with pytest.raises(LearnerConfigError) as info:
        make(cfg)
    assert str(info.value) == message


def test_window_for_an_undeclared_key_is_warned_about_once_at_the_first_iteration(caplog):
    learner = make({"monitor_windows": {"los": 5, "loss": 3, "extra/key": 9}}, logger=logging.getLogger("rlearn.test.win"))
    learner.declare_monitor_vars(["extra/key"])  # declared by the run before training: no warning
    with caplog.at_level(logging.WARNING, logger="rlearn.test.win"):
        learner.train(None, envstep=1)
        learner.train(None, envstep=2)
    warnings = [r.getMessage() for r in caplog.records if "monitor_windows" in r.getMessage()]
    declared = ", ".join(learner.monitor_vars())
    assert warnings == [
        "config key 'learner.monitor_windows.los': no monitor key 'los' is declared, so this window is never used; "
        f"did you mean 'loss'? declared keys (TinyPolicy): {declared}"
    ]


def test_per_key_windows_and_hooks_from_config(tmp_path):
    learner = make(
        {"monitor_window": 5, "monitor_windows": {"aux": 50}, "hooks": [dict(type="LogShowHook", freq=3, priority="BELOW_NORMAL")]},
        work_dir=tmp_path,
    )
    assert learner.monitor.window_size("loss") == 5 and learner.monitor.window_size("aux") == 50
    (hook,) = learner.hooks
    assert type(hook).__name__ == "LogShowHook" and hook.freq == 3 and int(hook.priority) == 60


# ------------------------------------------------------------------------------------ one iteration
class Spy(Hook):
    def __init__(self, events, learner_ref):
        self.events = events
        self.learner_ref = learner_ref

    def before_iter(self, learner):
        self.events.append(("before_iter", learner.train_iter, learner.envstep, learner.monitor.tick_count))

    def after_iter(self, learner):
        # the values of this iteration are in the window, the tick has not happened yet
        self.events.append(
            ("after_iter", learner.train_iter, learner.monitor.tick_count, learner.monitor.last("loss"), learner.monitor.count("loss"))
        )


def test_iteration_order_counters_and_message_hub():
    learner = make({"monitor_window": 10})
    events = []
    learner.register_hook(Spy(events, learner))
    learner.policy.script = [{"loss": 2.0}, {"loss": 4.0, "aux": 1}]
    out = learner.train("batch", envstep=16)
    assert out == {"loss": 2.0}
    learner.train("batch")  # envstep unchanged
    assert events == [
        ("before_iter", 0, 16, 0),
        ("after_iter", 1, 0, 2.0, 1),
        ("before_iter", 1, 16, 1),
        ("after_iter", 2, 1, 4.0, 2),
    ]
    assert (learner.train_iter, learner.envstep, learner.monitor.tick_count) == (2, 16, 2)
    assert learner.monitor.avg("loss") == 3.0 and learner.monitor.avg("aux") == 1.0
    hub = learner.message_hub
    assert (hub.get_info("train_iter"), hub.get_info("envstep"), hub.get_info("policy")) == (2, 16, "TinyPolicy")


def test_envstep_must_be_an_int_that_does_not_decrease():
    learner = make()
    learner.train(None, envstep=10)
    with pytest.raises(ValueError, match="envstep went backwards: 5 < 10"):
        learner.train(None, envstep=5)
    with pytest.raises(TypeError, match="envstep must be an int"):
        learner.train(None, envstep=5.0)
    assert learner.train_iter == 1 and learner.envstep == 10


def test_forward_learn_must_return_a_dict():
    learner = make()
    learner.policy.script = [[("loss", 1.0)]]
    with pytest.raises(TypeError, match="TinyPolicy._forward_learn must return a dict of scalars, got list"):
        learner.train(None)
    assert learner.train_iter == 0


def test_a_failing_after_iter_hook_still_ticks():
    class Boom(Hook):
        def after_iter(self, learner):
            raise RuntimeError("boom")

    learner = make()
    learner.register_hook(Boom())
    with pytest.raises(RuntimeError, match="boom"):
        learner.train(None)
    assert learner.train_iter == 1 and learner.monitor.tick_count == 1


# --------------------------------------------------------------------------------------------- cur_lr
def test_cur_lr_is_read_after_scheduling():
    learner = make({"monitor_window": 1})
    optimizer = learner.policy.opts["o0"]
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)

    class SchedulerStep(Hook):
        def after_iter(self, learner):
            scheduler.step()

    learner.register_hook(SchedulerStep())
    assert learner.monitor_vars() == ["loss", "aux", "cur_lr"]
    seen = []
    for _ in range(4):
        learner.train(None)
        seen.append(learner.monitor.last("cur_lr"))
    # the lr the optimizer used in each iteration: 0.1, then halved by each scheduler step
    assert seen == pytest.approx([0.1, 0.05, 0.025, 0.0125], rel=0, abs=1e-15)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.00625)


def test_cur_lr_with_lr_scheduler_hook_warmup():
    from rlearn.hooks import LRSchedulerHook

    learner = make({"monitor_window": 1})
    hook = LRSchedulerHook(scheduler=dict(type="StepLR", step_size=2, gamma=0.1), warmup="linear", warmup_iters=4, warmup_ratio=0.5)
    learner.register_hook(hook)
    learner.call_hook("before_run")
    seen = []
    for _ in range(6):
        learner.train(None)
        seen.append(learner.monitor.last("cur_lr"))
    # iteration i uses 0.1 * 0.1 ** (i // 2) (StepLR) times the linear warmup factor 1 - (1 - i/4) * 0.5
    expected = [0.1 * 0.5, 0.1 * 0.625, 0.01 * 0.75, 0.01 * 0.875, 0.001, 0.001]
    assert seen == pytest.approx(expected, rel=1e-12)


def test_several_optimizers_and_policy_owned_lr():
    learner = make(policy_cfg={"optimizers": 2})
    assert learner.monitor_vars() == ["loss", "aux", "cur_lr_o0", "cur_lr_o1"]
    learner.train(None)
    assert learner.monitor.last("cur_lr_o0") == pytest.approx(0.1) and learner.monitor.last("cur_lr_o1") == pytest.approx(0.2)

    own = make(policy_cfg={"declare": ["loss", "cur_lr_actor"]})
    assert own.monitor_vars() == ["loss", "cur_lr_actor"]
    own.train(None)
    assert own.monitor.keys() == ["loss"]

    none = make(policy_cfg={"optimizers": 0})
    none.train(None)
    assert none.monitor_vars() == ["loss", "aux"] and none.monitor.keys() == ["loss"]


# --------------------------------------------------------------------------------------------- record
def test_undeclared_key_recorded_with_one_warning(caplog, logger):
    learner = make(logger=logger)
    learner.policy.script = [{"loss": 1.0, "mystery": 2.0}, {"mystery": 4.0}, {"mystery": 6.0, "other": 1}]
    with caplog.at_level(logging.WARNING, logger="rlearn.test.learner"):
        for _ in range(3):
            learner.train(None)
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([m for m in messages if "'mystery'" in m]) == 1
    assert len([m for m in messages if "'other'" in m]) == 1
    assert "monitor key 'mystery' is not declared" in messages[0]
    assert "add it to TinyPolicy._monitor_vars_learn()" in messages[0]
    assert learner.monitor.avg("mystery") == 4.0 and learner.monitor.avg("other") == 1.0


def test_strict_mode_raises_before_recording_anything():
    learner = make({"strict": True})
    learner.policy.script = [{"loss": 5.0, "mystery": 2.0}]
    with pytest.raises(ValueError, match=r"undeclared monitor key\(s\) 'mystery' \(strict mode\): add them to TinyPolicy._monitor_vars_learn\(\)"):
        learner.train(None)
    assert learner.monitor.last("loss") is None and learner.monitor.last("mystery") is None
    assert learner.train_iter == 0
    learner.declare_monitor_vars(["mystery"])
    learner.policy.script = [{"loss": 5.0, "mystery": 2.0}]
    learner.train(None)
    assert learner.monitor.last("mystery") == 2.0


def test_bad_value_type_names_the_key_and_records_nothing_of_the_update():
    learner = make()
    learner.policy.script = [{"loss": 1.0, "aux": "high"}]
    with pytest.raises(TypeError, match="aux"):
        learner.train(None)
    assert learner.monitor.last("loss") is None
    with pytest.raises(TypeError, match="record expects a dict"):
        learner.record([1.0])


def test_tensor_and_numpy_values(tmp_path):
    learner = make()
    learner.policy.script = [{"loss": torch.tensor(2.0), "aux": np.float32(3.0)}, {"loss": torch.tensor([4.0])}]
    learner.train(None)
    learner.train(None)
    assert learner.monitor.avg("loss") == 3.0 and learner.monitor.avg("aux") == 3.0


def test_declare_monitor_vars():
    learner = make()
    learner.declare_monitor_vars(["data_time", "collector/episode_return", "data_time"])
    learner.declare_monitor_vars("train_time")
    assert learner.monitor_vars() == ["loss", "aux", "cur_lr", "data_time", "collector/episode_return", "train_time"]
    with pytest.raises(TypeError, match="non-empty strings"):
        learner.declare_monitor_vars([""])


def test_rank_checks_and_register_state():
    with pytest.raises(ValueError, match="rank"):
        make(rank=2, world_size=2)
    learner = make()
    with pytest.raises(TypeError, match="no state_dict/load_state_dict"):
        learner.register_state("thing", object())
    learner.register_state("buffer", torch.nn.Linear(1, 1))
    with pytest.raises(ValueError, match="'buffer' is already registered"):
        learner.register_state("buffer", torch.nn.Linear(1, 1))


# ------------------------------------------------------------------------------------- metric path
def rows_writer():
    """A minimal writer keeping every write and counting flushes."""
    from rlearn.writers import Writer

    class RowsWriter(Writer):
        def __init__(self):
            self.rows = []
            self.flushes = 0

        def write_scalars(self, scalars, step_iter, step_env):
            self.rows.append((step_iter, step_env, dict(scalars)))

        def write_text(self, tag, text, step_iter):
            self.rows.append((step_iter, tag, text))

        def flush(self):
            self.flushes += 1

    return RowsWriter()


def test_default_writers_by_rank_and_work_dir(tmp_path):
    from rlearn.writers import JsonlWriter, TableWriter, TensorBoardWriter

    assert [type(w) for w in make(work_dir=tmp_path).writers] == [TableWriter, TensorBoardWriter, JsonlWriter]
    assert make(work_dir=tmp_path).writers[1].logdir == tmp_path / "tb"
    assert make(work_dir=tmp_path).writers[2].path == tmp_path / "metrics.jsonl"
    assert [type(w) for w in make().writers] == [TableWriter]
    assert make(work_dir=tmp_path, rank=1, world_size=2).writers == []


def test_log_metrics_keys_prefix_extra_and_end():
    writer = rows_writer()
    learner = make({"log_freq": 10}, writers=[writer])
    learner.declare_monitor_vars(["collector/episode_return"])
    learner.policy.script = [{"loss": 1.0, "aux": 5.0}, {"loss": 3.0, "mystery": float("nan")}]
    learner.train(None, envstep=4)
    learner.record({"collector/episode_return": -2.0})
    learner.train(None, envstep=8)
    every = learner.log_metrics(extra={"throughput/iters_per_sec": 2.0})
    assert every == {
        "throughput/iters_per_sec": 2.0, "loss_avg": 2.0, "aux_avg": 5.0, "cur_lr_avg": pytest.approx(0.1),
        "collector/episode_return_avg": -2.0, "mystery_avg": None, "mystery_nonfinite": 1,
    }
    assert writer.rows[-1] == (2, 8, every) and writer.flushes == 1
    assert learner.log_metrics(keys="collector/") == {"collector/episode_return_avg": -2.0}
    assert learner.log_metrics(keys=["aux", "nothing"]) == {"aux_avg": 5.0, "nothing_avg": None}
    assert learner.metric_keys() == ["loss", "aux", "cur_lr", "collector/episode_return", "mystery"]
    # end= is handed to the statistics step; the monitor of this branch has no end= yet, so the current
    # windows are used
    assert learner.last_tick() == 1 and learner.log_metrics(keys=["loss"], end=1) == {"loss_avg": 2.0}
    learner.write_scalars({"evaluator/episode_return_mean": 1.5}, 7, 70)
    assert writer.rows[-1] == (7, 70, {"evaluator/episode_return_mean": 1.5})


def test_log_metrics_numbers_are_the_monitors_own():
    """Through the statistics step, ``<key>_avg`` is exactly ``monitor.avg(key)`` (no sum/count round trip)."""
    learner = make({"log_freq": 3}, writers=[])
    learner.policy.script = [{"loss": 0.1}, {"loss": 0.2}, {"loss": 0.7}]
    for _ in range(3):
        learner.train(None)
    assert learner.log_metrics(keys=["loss"])["loss_avg"] == learner.monitor.avg("loss")


def test_log_processor_config():
    assert make().cfg["log_processor"] == {"custom_cfg": []}
    assert make({"log_processor": {"custom_cfg": []}}).statistics.custom_cfg == []
    for bad, match in (([], r"'learner\.log_processor'"), ({"window": 3}, r"'learner\.log_processor\.window'"),
                       ({"custom_cfg": "x"}, r"learner\.log_processor\.custom_cfg")):
        with pytest.raises(LearnerConfigError, match=match):
            make({"log_processor": bad})
    with pytest.raises(LearnerConfigError, match=r"learner\.log_processor\.custom_cfg\[0\].*method_name"):
        make({"log_processor": {"custom_cfg": [dict(data_src="loss", method_name="median")]}})


def test_custom_cfg_statistics_reach_the_writers():
    """``learner.log_processor.custom_cfg``: a replaced statistic and an added one over the last 2 values."""
    custom = [dict(data_src="loss", method_name="max"),
              dict(data_src="loss", method_name="min", log_name="loss_min_last2", last_n=2)]
    writer = rows_writer()
    learner = make({"log_freq": 3, "log_processor": {"custom_cfg": custom}}, writers=[writer])
    learner.policy.script = [{"loss": 0.5}, {"loss": 0.2}, {"loss": 0.7}, {"loss": 0.9}]
    for _ in range(4):
        learner.train(None)
    assert learner.log_metrics(keys=["loss"]) == {"loss_max": 0.9, "loss_min_last2": 0.7}
    assert writer.rows[-1] == (4, 0, {"loss_max": 0.9, "loss_min_last2": 0.7})


class CollectPolicy(TinyPolicy):
    def _monitor_vars_collect(self):
        return ["epsilon"]


def test_record_collect_sparse_undeclared_and_strict(caplog, logger):
    learner = BaseLearner(CollectPolicy(None, None, None), {"log_freq": 10}, logger=logger, writers=[])
    assert learner.monitor_vars() == ["loss", "aux", "collector/epsilon", "cur_lr"]
    assert learner.monitor_var_owner("collector/epsilon") == "CollectPolicy._monitor_vars_collect()"
    assert learner.monitor_var_owner("aux") == "CollectPolicy._monitor_vars_learn()"
    assert learner.monitor_var_owner("cur_lr") == "the learner"
    assert learner.monitor_var_owner("collector/episode_return") == "learner.declare_monitor_vars()"
    with caplog.at_level(logging.WARNING, logger="rlearn.test.learner"):
        learner.record_collect({"epsilon": [0.5, 0.25], "temperature": 2.0})
        learner.train(None)
        learner.record_collect({})  # a collect without metrics records nothing
        learner.train(None)
        learner.record_collect({"epsilon": [0.75], "temperature": [4.0]})
    assert learner.monitor.count("collector/epsilon") == 3 and learner.monitor.avg("collector/epsilon") == 0.5
    assert learner.monitor.avg("collector/temperature") == 3.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "monitor key 'collector/temperature' is not declared: it is recorded and shown, but add it to "
        "CollectPolicy._monitor_vars_collect()"
    ]
    strict = BaseLearner(CollectPolicy(None, None, None), {"strict": True}, writers=[])
    with pytest.raises(ValueError, match=r"'collector/temperature' \(strict mode\): add them to CollectPolicy._monitor_vars_collect\(\)"):
        strict.record_collect({"epsilon": [1.0], "temperature": [2.0]})
    assert strict.monitor.last("collector/epsilon") is None  # nothing of it recorded
    with pytest.raises(TypeError, match="record_collect expects a dict"):
        strict.record_collect([1.0])


def test_undeclared_key_of_a_hook_names_declare_monitor_vars(caplog, logger):
    learner = make(logger=logger, writers=[])
    with caplog.at_level(logging.WARNING, logger="rlearn.test.learner"):
        learner.record({"data_wait": 1.0})
    (message,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert message.endswith("add it to learner.declare_monitor_vars()") and "_monitor_vars_learn" not in message


def test_writer_state_in_checkpoints(tmp_path):
    from rlearn.checkpoint import files as ckpt

    learner = make(work_dir=tmp_path)
    learner.train(None, envstep=5)
    learner.log_metrics()
    path = learner.save_checkpoint()
    saved = torch.load(path, weights_only=False)["learner"]["writers"]
    assert list(saved) == ["TensorBoardWriter", "JsonlWriter"]
    assert saved["JsonlWriter"] == {"rows": 1}
    assert saved["TensorBoardWriter"]["points"]["learner_iter/loss_avg"] == [1, 1]
    assert saved["TensorBoardWriter"]["points"]["learner_step/loss_avg"] == [5, 1]

    other = make(work_dir=tmp_path / "other")
    other.load_checkpoint(path, rewind_tensorboard=False)
    assert other.writers[1].points["learner_step/loss_avg"] == [5, 1]


def test_policy_monitor_vars_lists_learn_then_collect_keys_checked():
    assert CollectPolicy(None, None, None).monitor_vars() == ["loss", "aux", "collector/epsilon"]
    assert CollectPolicy(None, None, None).monitor_vars_collect() == ["epsilon"]
    assert TinyPolicy(None, None, None).monitor_vars_collect() == []

    def policy_with(collect):
        class P(TinyPolicy):
            def _monitor_vars_collect(self):
                return collect

        return P(None, None, None)

    with pytest.raises(ValueError, match=r"P._monitor_vars_collect\(\) lists 'epsilon' twice"):
        policy_with(["epsilon", "epsilon"]).monitor_vars()
    with pytest.raises(TypeError, match=r"P._monitor_vars_collect\(\) must return non-empty strings, got ''"):
        policy_with([""]).monitor_vars()
    with pytest.raises(ValueError, match=r"lists \['action', 'reward'\]: those names are transition data"):
        policy_with(["action", "reward"]).monitor_vars()
    with pytest.raises(ValueError, match=r"_monitor_vars_learn\(\) lists \['collector/epsilon'\], monitored collect keys"):
        class Both(CollectPolicy):
            def _monitor_vars_learn(self):
                return ["loss", "collector/epsilon"]

        Both(None, None, None).monitor_vars()


def test_message_hub_carries_runtime_state():
    """The hub hooks read runtime state from: counters, and the optimizers' current (scheduled) lr."""
    learner = make(writers=[])
    learner.policy.script = [{"loss": 0.5}] * 2
    optimizer = next(iter(learner.policy.optimizers().values()))
    name = next(iter(learner.policy.optimizers()))
    learner.train(None, envstep=4)
    hub = learner.message_hub
    assert (hub.get_info("train_iter"), hub.get_info("envstep")) == (1, 4)
    assert hub.get_info("lr") == {name: optimizer.param_groups[0]["lr"]}
    optimizer.param_groups[0]["lr"] = 0.125  # what a scheduler does between iterations
    learner.train(None, envstep=8)
    assert hub.get_info("lr") == {name: 0.125} and hub.get_info("train_iter") == 2
    assert "lr" not in hub.state_dict()["runtime_info"] and "train_iter" in hub.state_dict()["runtime_info"]
