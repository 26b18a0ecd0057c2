"""``LogShowHook``: every ``freq`` train iterations, the learner's metrics and throughput to every writer.

Throughput (``throughput/iters_per_sec``, ``throughput/env_steps_per_sec``) is measured over train time: the
wall time since the previous log minus evaluations, checkpoints and the previous log's writing; the time left
out is written as ``time/eval_s`` and ``time/checkpoint_s``. See docs/hooks.md and docs/reading-the-logs.md.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from rlearn import trace
from rlearn.hooks.base import Hook, Priority
from rlearn.monitor.statistics import RESERVED_NAMES
from rlearn.registry import HOOKS
from rlearn.trace.recorder import MONOTONIC_CLOCK
from rlearn.writers.base import ScalarValue
from rlearn.values import check_int
from rlearn.writers.table import TableWriter, format_value

__all__ = ["LogShowHook", "THROUGHPUT_KEYS", "PAUSE_KEYS", "format_value"]

#: the throughput names written beside the statistics (TensorBoard: ``throughput_iter/...``, ``throughput_step/...``)
THROUGHPUT_KEYS = RESERVED_NAMES[3:5]
#: what the throughput leaves out: pause kind -> the name of its seconds in the interval (written after the throughput)
PAUSE_KEYS = dict(zip(("eval", "checkpoint"), RESERVED_NAMES[5:7]))


@HOOKS.register
class LogShowHook(Hook):
    """Periodic log of the learner's metrics to every writer (table, TensorBoard...).

    Args:
        freq: iterations between two logs; None uses the learner's ``log_freq``.
        width: width of the learner's :class:`~rlearn.writers.TableWriter` tables in characters; None
            leaves them at the terminal width.

    Default priority ``BELOW_NORMAL`` (60): before ``CheckpointHook`` (``LOW``), so a checkpoint contains the
    points of its own log. A declared key never reported is warned about once (rank 0), from the second log on
    (or at the end), once ``train_iter`` has reached its window and its declared period
    (``Policy.monitor_periods``), so a rare key is not flagged before it could have appeared.
    """

    DEFAULT_PRIORITY = Priority.BELOW_NORMAL

    def __init__(self, freq: Optional[int] = None, width: Optional[int] = None) -> None:
        self.freq = check_int("LogShowHook freq", freq, optional=True)
        self.width = check_int("LogShowHook width", width, 20, optional=True)
        self.logs = 0
        # (perf_counter_ns, train_iter, envstep) of the end of the previous log, and the paused time since then
        self._since: Optional[Tuple[int, int, int]] = None
        self._paused_ns: Dict[str, int] = dict.fromkeys(PAUSE_KEYS, 0)
        self._pause: Optional[Tuple[str, int]] = None  # (kind, start) of the pause going on

    def before_run(self, learner: Any) -> None:
        self._since = (MONOTONIC_CLOCK(), learner.train_iter, learner.envstep)
        self._paused_ns, self._pause = dict.fromkeys(PAUSE_KEYS, 0), None

    def before_iter(self, learner: Any) -> None:
        self._resume_clock()

    def before_collect(self, learner: Any) -> None:
        self._resume_clock()

    def after_iter(self, learner: Any) -> None:
        freq = self.freq if self.freq is not None else learner.cfg["log_freq"]
        if self._since is None:  # train() called without before_run: measure from the first iteration seen
            self._since = (MONOTONIC_CLOCK(), learner.train_iter - 1, learner.envstep)
        if learner.train_iter % freq == 0:  # every_n_iters inlined (freq is a checked positive int): every iteration
            self.log(learner)

    def before_eval(self, learner: Any) -> None:
        self._resume_clock()  # a checkpoint pause just before it ends here: the evaluation counts as such
        self._pause_clock("eval")

    def after_eval(self, learner: Any) -> None:
        self._resume_clock()

    def before_save_checkpoint(self, learner: Any, checkpoint: Dict[str, Any]) -> None:
        self._pause_clock("checkpoint")  # written after this; the loop's next phase resumes the clock

    def after_run(self, learner: Any) -> None:
        if learner.rank != 0:
            return
        if self.logs >= 1:
            learner.metrics.warn_never_reported(learner.train_iter, learner.policy)
        learner.close()  # flushes and closes the writers; a later write opens new files

    def _pause_clock(self, kind: str) -> None:
        """Count the time until :meth:`_resume_clock` as ``kind`` (``"eval"``, ``"checkpoint"``), not as train
        time; inside a pause (``best.pt`` saved by an evaluation) nothing changes."""
        if self._pause is None:
            self._pause = (kind, MONOTONIC_CLOCK())

    def _resume_clock(self) -> None:
        if self._pause is not None:
            kind, start = self._pause
            self._paused_ns[kind] += MONOTONIC_CLOCK() - start
            self._pause = None

    def log(self, learner: Any, end: Optional[int] = None) -> Dict[str, ScalarValue]:
        """Write the throughput and the metric statistics to every writer; returns what was written.

        ``end``: the last monitor tick the windows cover (None: the current one). With several processes every
        rank must call it at the same iteration (the statistics are gathered).
        """
        throughput = self._throughput(learner)
        if self.width is not None:
            for writer in learner.writers:
                if isinstance(writer, TableWriter):
                    writer.width = self.width
        values = learner.log_metrics(end=end, extra=throughput)
        # the next interval starts once this log is written: writing it is not train time either
        self._since = (MONOTONIC_CLOCK(), learner.train_iter, learner.envstep)
        if learner.rank == 0:
            self.logs += 1
            if self.logs >= 2:
                learner.metrics.warn_never_reported(learner.train_iter, learner.policy)
        return values

    def final_log(self, learner: Any) -> Optional[Dict[str, ScalarValue]]:
        """The last log of a run, after the loop (and the last tick): only if iterations completed since the
        previous log (else None), with windows ending at the last completed iteration (``learner.last_tick()``)."""
        if self._since is None or learner.train_iter == self._since[1]:
            return None
        return self.log(learner, end=learner.last_tick())

    def _throughput(self, learner: Any) -> Dict[str, ScalarValue]:
        """Iterations and env steps per second of train time since the previous log (also as trace counters
        stamped at the interval start), then the seconds left out of it (:data:`PAUSE_KEYS`)."""
        self._resume_clock()  # a log can only come after the paused phase ended
        now = MONOTONIC_CLOCK()
        iters_per_sec = env_per_sec = None
        paused = self._paused_ns
        if self._since is not None:
            elapsed = (now - self._since[0] - sum(paused.values())) / 1e9
            if elapsed > 0:
                iters_per_sec = (learner.train_iter - self._since[1]) / elapsed
                env_per_sec = (learner.envstep - self._since[2]) / elapsed
                trace.counter(THROUGHPUT_KEYS[0], iters_per_sec, self._since[0])
                trace.counter(THROUGHPUT_KEYS[1], env_per_sec, self._since[0])
        self._since = (now, learner.train_iter, learner.envstep)
        self._paused_ns = dict.fromkeys(PAUSE_KEYS, 0)
        values: Dict[str, ScalarValue] = dict(zip(THROUGHPUT_KEYS, (iters_per_sec, env_per_sec)))
        values.update({name: paused[kind] / 1e9 for kind, name in PAUSE_KEYS.items()})
        return values

    def state_dict(self) -> Dict[str, Any]:
        """The number of logs so far (the keys already warned about are in the learner's metrics state)."""
        return {"logs": self.logs}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.logs = int(state["logs"])
