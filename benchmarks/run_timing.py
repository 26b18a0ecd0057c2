"""Shared parts of the benchmarks that train rlearn through its ``Trainer``: timing collection and evaluation
from a hook, keeping the log tables off the console, and timing one method of the policy.

Not a benchmark itself; ``bench_ppo.py`` and ``bench_ppg.py`` use it.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List

from rlearn.hooks import Hook

clock = time.perf_counter


class EvalTimingHook(Hook):
    """Times collection and evaluation, and records every evaluation with the training time so far
    (``points``: ``envstep``, ``train_time`` -- evaluation time excluded --, ``eval_return``).

    ``train_time()`` after the run: wall time from ``before_run`` to ``after_run`` minus the evaluations.
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.start = self.end = self._t = 0.0
        self.collect = self.evaluate = 0.0
        self.points: List[Dict[str, float]] = []

    def before_run(self, learner: Any) -> None:
        self.start = clock()

    def before_collect(self, learner: Any) -> None:
        self._t = clock()

    def after_collect(self, learner: Any) -> None:
        self.collect += clock() - self._t

    def before_eval(self, learner: Any) -> None:
        self._t = clock()

    def after_eval(self, learner: Any) -> None:
        now = clock()
        self.evaluate += now - self._t
        self.points.append(dict(envstep=learner.envstep, train_time=now - self.start - self.evaluate,
                                eval_return=self.trainer.eval_hook.state.last_result["episode_return_mean"]))

    def after_run(self, learner: Any) -> None:
        self.end = clock()

    def train_time(self) -> float:
        return self.end - self.start - self.evaluate


def attach(trainer: Any) -> EvalTimingHook:
    """Register an :class:`EvalTimingHook` on ``trainer`` and keep its log tables off the console (they still
    go to the run's log file)."""
    for handler in trainer.logger.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.WARNING)
    hook = EvalTimingHook(trainer)
    trainer.learner.register_hook(hook)
    return hook


def time_method(obj: Any, name: str, timers: Dict[str, float], key: str) -> None:
    """Wrap ``obj.<name>`` (as an instance attribute: the class is untouched) so that its seconds add up in
    ``timers[key]``."""
    method: Callable[..., Any] = getattr(obj, name)
    timers.setdefault(key, 0.0)

    def timed(*args: Any, **kwargs: Any) -> Any:
        begin = clock()
        try:
            return method(*args, **kwargs)
        finally:
            timers[key] += clock() - begin

    setattr(obj, name, timed)
