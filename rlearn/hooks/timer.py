"""``TimerHook``: records ``data_time`` and ``train_time`` of every train iteration.

Registered at ``Priority.HIGHEST`` by default, so its ``before_iter`` runs first and its ``after_iter``
runs first too:

* ``train_time``: from the start of ``before_iter`` to the start of ``after_iter`` -- the
  ``before_iter`` hooks, the policy's ``_forward_learn`` and the recording of its values;
* ``data_time``: from the previous iteration's ``after_iter`` (or ``before_run``) to this
  ``before_iter`` -- everything the learner waits for between two iterations: collecting
  environment steps, sampling the buffer, evaluation, and the lower-priority ``after_iter`` hooks
  of the previous iteration (logging, checkpoints).

Both are in seconds, measured with ``time.perf_counter`` and recorded with ``learner.record`` (they
are declared monitor variables, so they appear in the table as ``data_time_avg`` / ``train_time_avg``).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional

from rlearn.hooks.base import Hook, Priority
from rlearn.registry import HOOKS

__all__ = ["TimerHook"]


@HOOKS.register
class TimerHook(Hook):
    """Times each train iteration and the gap before it; see the module docstring.

    Args:
        clock: a function returning seconds (default ``time.perf_counter``); tests pass a fake one.
    """

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
        self._last_end = None
        self._start = None
