"""The hook core: priorities, registration order, the reserved attribute, call_hook, build_hook, the
helpers, and TimerHook (with a fake clock, so its numbers are exact)."""

from __future__ import annotations

import inspect
from typing import Any, Iterable, List, Mapping

import pytest

from rlearn.hooks import (
    HOOKS,
    MOUNT_POINTS,
    Hook,
    HookManager,
    LRSchedulerHook,
    Priority,
    TimerHook,
    build_hook,
    get_priority,
)
from rlearn.monitor import TickMonitor


class Manager(HookManager):
    """The smallest learner-like object: counters, a monitor, record/declare."""

    def __init__(self) -> None:
        super().__init__()
        self.train_iter = 0
        self.envstep = 0
        self.monitor = TickMonitor(window_size=10)
        self.declared: List[str] = []

    def declare_monitor_vars(self, keys: Iterable[str]) -> None:
        self.declared.extend(k for k in keys if k not in self.declared)

    def record(self, info: Mapping[str, Any]) -> None:
        self.monitor.update(info)


class Recorder(Hook):
    def __init__(self, name: str, log: list) -> None:
        self.name = name
        self.log = log

    def before_iter(self, learner):
        self.log.append(self.name)

    def before_save_checkpoint(self, learner, checkpoint):
        checkpoint[self.name] = True


# ---------------------------------------------------------------------------------------- priorities
def test_priority_values():
    assert {p.name: p.value for p in Priority} == {
        "HIGHEST": 0, "VERY_HIGH": 10, "HIGH": 30, "ABOVE_NORMAL": 40, "NORMAL": 50,
        "BELOW_NORMAL": 60, "LOW": 70, "VERY_LOW": 90, "LOWEST": 100,
    }


@pytest.mark.parametrize(
    "given, expected",
    [("NORMAL", 50), ("below_normal", 60), (" Very_High ", 10), (Priority.LOW, 70), (0, 0), (100, 100), (42, 42)],
)
def test_get_priority_accepts_names_enums_and_ints(given, expected):
    assert get_priority(given) == expected


@pytest.mark.parametrize("bad, error, message", [
    (101, ValueError, "0..100"),
    (-1, ValueError, "0..100"),
    ("NORMALL", ValueError, "unknown hook priority 'NORMALL'. Did you mean 'NORMAL'"),
    ("", ValueError, "Known names: HIGHEST"),
    (True, TypeError, "not a bool"),
    (50.0, TypeError, "got float"),
    (None, TypeError, "got NoneType"),
    ([50], TypeError, "got list"),
])
def test_get_priority_refuses_bad_values(bad, error, message):
    with pytest.raises(error, match=message):
        get_priority(bad)


# -------------------------------------------------------------------------------------- registration
def test_lower_priority_runs_first_and_ties_keep_registration_order():
    manager = Manager()
    log: list = []
    plan = [("a", "LOW"), ("b", 10), ("c", "LOW"), ("d", Priority.HIGHEST), ("e", None), ("f", 70), ("g", 50), ("h", 100)]
    for name, priority in plan:
        manager.register_hook(Recorder(name, log), priority)
    manager.call_hook("before_iter")
    assert log == ["d", "b", "e", "g", "a", "c", "f", "h"]
    assert [h.priority for h in manager.hooks] == [0, 10, 50, 50, 70, 70, 70, 100]


def test_reserved_priority_attribute():
    manager = Manager()
    hook = Recorder("x", [])
    manager.register_hook(hook, "HIGH")
    assert hook.priority == 30
    with pytest.raises(ValueError, match='"priority" is a reserved attribute'):
        manager.register_hook(hook)  # registered twice
    other = Manager()
    with pytest.raises(ValueError, match="reserved"):
        other.register_hook(hook)  # a hook belongs to one manager

    class OwnPriority(Hook):
        priority = 5

    with pytest.raises(ValueError, match="OwnPriority already has one"):
        manager.register_hook(OwnPriority())
    assert len(manager.hooks) == 1


def test_register_refuses_non_hooks_and_bad_priorities_without_side_effects():
    manager = Manager()

    class Duck:
        def before_iter(self, learner):
            pass

    with pytest.raises(TypeError, match="expects a rlearn.hooks.Hook instance, got Duck"):
        manager.register_hook(Duck())
    hook = Recorder("x", [])
    with pytest.raises(ValueError, match="0..100"):
        manager.register_hook(hook, 500)
    with pytest.raises(TypeError, match="bool"):
        manager.register_hook(hook, False)
    assert not hasattr(hook, "priority") and manager.hooks == []
    manager.register_hook(hook)  # still registrable after the failed attempts


def test_default_priority_comes_from_the_class():
    manager = Manager()
    manager.register_hook(Recorder("normal", []))
    manager.register_hook(TimerHook())
    assert [type(h).__name__ for h in manager.hooks] == ["TimerHook", "Recorder"]
    assert [h.priority for h in manager.hooks] == [Priority.HIGHEST, Priority.NORMAL]


def test_hooks_property_is_a_copy():
    manager = Manager()
    manager.register_hook(Recorder("x", []))
    manager.hooks.clear()
    assert len(manager.hooks) == 1


def test_call_hook_passes_arguments_and_refuses_unknown_mount_points():
    manager = Manager()
    manager.register_hook(Recorder("first", []))
    manager.register_hook(Recorder("second", []))
    checkpoint: dict = {}
    manager.call_hook("before_save_checkpoint", checkpoint)
    assert checkpoint == {"first": True, "second": True}
    with pytest.raises(ValueError, match="unknown hook mount point 'after_itr'. Did you mean 'after_iter'"):
        manager.call_hook("after_itr")
    with pytest.raises(ValueError, match="Mount points: before_run, after_run"):
        manager.call_hook("__init__")


def test_call_hook_calls_only_the_hooks_that_implement_the_mount_point():
    log: list = []

    class AfterOnly(Hook):
        def after_iter(self, learner):
            log.append("after")

    class Sub(Recorder):  # inherits Recorder's before_iter
        pass

    manager = Manager()
    plain, after, first = Hook(), AfterOnly(), Recorder("first", log)
    for hook in (plain, after, first):
        manager.register_hook(hook)
    assert manager.hooks_at("before_iter") == [first] and manager.hooks_at("after_iter") == [after]
    assert manager.hooks_at("before_eval") == []
    manager.call_hook("before_iter")
    manager.call_hook("after_iter")
    assert log == ["first", "after"]
    # registering refreshes the lists (priority order kept); a method set on the instance counts too
    sub, patched = Sub("sub", log), Hook()
    patched.before_iter = lambda learner: log.append("patched")  # type: ignore[method-assign]
    manager.register_hook(sub, "HIGHEST")
    manager.register_hook(patched, "LOWEST")
    assert manager.hooks_at("before_iter") == [sub, first, patched]
    manager.call_hook("before_iter")
    assert log == ["first", "after", "sub", "first", "patched"]
    manager.hooks_at("before_iter").clear()  # a copy
    assert len(manager.hooks_at("before_iter")) == 3
    with pytest.raises(ValueError, match="unknown hook mount point 'after_itr'"):
        manager.hooks_at("after_itr")


def test_every_mount_point_exists_on_hook_and_does_nothing():
    manager = Manager()
    manager.register_hook(Hook())
    for name in MOUNT_POINTS:
        params = list(inspect.signature(getattr(Hook, name)).parameters)
        assert params[:2] == ["self", "learner"], name
        args = ({},) if "checkpoint" in params else ()
        manager.call_hook(name, *args)
    assert set(MOUNT_POINTS) == {
        "before_run", "after_run", "before_iter", "after_iter", "before_collect", "after_collect",
        "before_eval", "after_eval", "before_save_checkpoint", "after_load_checkpoint",
    }


def test_get_hook_by_class_or_name():
    manager = Manager()
    timer = TimerHook()
    recorder = Recorder("x", [])
    manager.register_hook(recorder)
    manager.register_hook(timer)
    assert manager.get_hook(TimerHook) is timer and manager.get_hook("Recorder") is recorder
    assert manager.get_hook(Hook) is timer  # first in calling order
    with pytest.raises(KeyError, match=r"no hook 'LRSchedulerHook' is registered \(registered: TimerHook, Recorder\)"):
        manager.get_hook(LRSchedulerHook)
    with pytest.raises(TypeError, match="hook class or class name"):
        manager.get_hook(3)


# ----------------------------------------------------------------------------------------- helpers
def test_every_n_iters():
    manager = Manager()
    fired = []
    for it in range(1, 11):
        manager.train_iter = it
        fired.append(Hook.every_n_iters(manager, 4))
    assert [i for i, f in zip(range(1, 11), fired) if f] == [4, 8]
    assert not Hook.every_n_iters(manager, 0)
    with pytest.raises(TypeError, match="n must be an int"):
        Hook.every_n_iters(manager, 2.0)


def test_every_n_envsteps_crosses_boundaries_in_chunks():
    manager = Manager()
    fired, last = [], None
    for envstep in (0, 96, 192, 288, 384, 480):  # 96 env steps per collection, n = 200
        manager.envstep = envstep
        if Hook.every_n_envsteps(manager, 200, last):
            fired.append(envstep)
            last = envstep
    assert fired == [288, 480]  # first reached 200 at 288, then 400 at 480
    assert not Hook.every_n_envsteps(manager, 0, None)


def test_is_first_iter():
    manager = Manager()
    assert Hook.is_first_iter(manager)
    manager.train_iter = 3
    assert not Hook.is_first_iter(manager)


# -------------------------------------------------------------------------------------- build_hook
def test_build_hook_returns_hook_and_priority():
    cfg = dict(type="TimerHook", priority="below_normal")
    hook, priority = build_hook(cfg)
    assert isinstance(hook, TimerHook) and priority == 60
    assert cfg == dict(type="TimerHook", priority="below_normal")  # not modified
    hook, priority = build_hook(dict(type="TimerHook"))
    assert priority == Priority.HIGHEST  # the class default
    hook, priority = build_hook(dict(type="LRSchedulerHook", warmup="linear", warmup_iters=5))
    assert priority == Priority.NORMAL and hook.warmup_iters == 5


def test_build_hook_errors():
    with pytest.raises(KeyError, match="unknown hook type 'LogHook'.*Known hook types: .*LRSchedulerHook.*TimerHook"):
        build_hook(dict(type="LogHook", freq=10))
    with pytest.raises(ValueError, match=r"hook config \{'type': 'TimerHook', 'priority': 'URGENT'\}: unknown hook priority"):
        build_hook(dict(type="TimerHook", priority="URGENT"))
    with pytest.raises(TypeError, match="cannot build hook 'TimerHook'.*'freq'"):
        build_hook(dict(type="TimerHook", freq=3))
    with pytest.raises(KeyError, match="no 'type' key"):
        build_hook(dict(freq=3))
    with pytest.raises(TypeError, match="must be a dict"):
        build_hook("TimerHook")


def test_build_hook_refuses_registered_non_hooks():
    @HOOKS.register("NotAHook_for_test")
    class NotAHook:
        pass

    try:
        with pytest.raises(TypeError, match="not a rlearn.hooks.Hook"):
            build_hook(dict(type="NotAHook_for_test"))
    finally:
        HOOKS._entries.pop("NotAHook_for_test")


# ------------------------------------------------------------------------------------------- timer
class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_timer_hook_exact_times():
    clock = FakeClock()
    manager = Manager()
    manager.register_hook(TimerHook(clock=clock))
    clock.now = 10.0
    manager.call_hook("before_run")
    assert manager.declared == ["data_time", "train_time"]
    schedule = [(12.0, 15.0), (21.0, 22.5), (23.0, 27.0)]  # (before_iter, after_iter) times
    recorded = []
    for start, end in schedule:
        clock.now = start
        manager.call_hook("before_iter")
        clock.now = end
        manager.train_iter += 1
        manager.call_hook("after_iter")
        recorded.append((manager.monitor.last("data_time"), manager.monitor.last("train_time")))
        manager.monitor.tick()
    # data_time: from before_run / the previous after_iter to before_iter; train_time: before_iter to after_iter
    assert recorded == [(2.0, 3.0), (6.0, 1.5), (0.5, 4.0)]
    assert manager.monitor.avg("data_time") == pytest.approx((2.0 + 6.0 + 0.5) / 3)
    assert manager.monitor.count("train_time") == 3


def test_timer_hook_without_before_run_records_train_time_only_at_first():
    clock = FakeClock()
    manager = Manager()
    manager.register_hook(TimerHook(clock=clock))
    clock.now = 1.0
    manager.call_hook("before_iter")
    clock.now = 1.25
    manager.call_hook("after_iter")
    assert manager.declared == ["data_time", "train_time"]  # declared lazily
    assert manager.monitor.last("train_time") == 0.25 and manager.monitor.last("data_time") is None
    manager.call_hook("after_iter")  # an after_iter with no before_iter records nothing
    assert manager.monitor.count("train_time") == 1


def test_timer_hook_with_the_real_clock():
    manager = Manager()
    manager.register_hook(TimerHook())
    manager.call_hook("before_run")
    for _ in range(3):
        manager.call_hook("before_iter")
        sum(range(1000))
        manager.call_hook("after_iter")
        manager.monitor.tick()
    assert manager.monitor.count("train_time") == 3 and manager.monitor.min("train_time") >= 0.0
    assert manager.monitor.count("data_time") == 3 and manager.monitor.min("data_time") >= 0.0


def test_timer_hook_refuses_a_non_callable_clock():
    with pytest.raises(TypeError, match="clock must be a callable"):
        TimerHook(clock=3.0)
