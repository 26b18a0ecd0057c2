"""``TimerHook``: records ``data_time`` (previous ``after_iter`` to this ``before_iter``) and ``train_time``
(``before_iter`` to ``after_iter``) of every train iteration, in seconds; first at both points (``HIGHEST``)."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional

from rlearn.hooks.base import Hook, Priority
from rlearn.registry import HOOKS

__all__ = ["TimerHook"]


@HOOKS.register
class TimerHook(Hook):
    """Times each train iteration and the gap before it; ``clock`` returns seconds (``time.perf_counter``)."""

    DEFAULT_PRIORITY = Priority.HIGHEST
    #: the monitor keys this hook records
    KEYS = ("data_time", "train_time")

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        if not callable(clock):
            raise TypeError(f"TimerHook clock must be a callable returning seconds, got {clock!r}")
        self.clock = clock
        self._declared_for: Optional[int] = None  # id() of the learner the keys were declared on
        self._last_end: Optional[float] = None  # end of the previous iteration (or before_run)
        self._start: Optional[float] = None  # start of the current iteration
        self._data_time: Optional[float] = None

    def _declare(self, learner: Any) -> None:
        if self._declared_for != id(learner):
            learner.declare_monitor_vars(list(self.KEYS))
            self._declared_for = id(learner)

    def before_run(self, learner: Any) -> None:
        self._declare(learner)
        self._last_end = self.clock()

    def before_iter(self, learner: Any) -> None:
        now = self.clock()
        self._declare(learner)
        self._data_time = None if self._last_end is None else now - self._last_end
        self._start = now

    def after_iter(self, learner: Any) -> None:
        end = self.clock()
        if self._start is None:  # after_iter without before_iter: nothing to time
            return
        info: Dict[str, float] = {"train_time": end - self._start}
        if self._data_time is not None:
            info["data_time"] = self._data_time
        learner.record(info)
        self._start = None
        self._last_end = self.clock()

    def after_run(self, learner: Any) -> None:
        self._last_end = self._start = None
