"""``LogShowHook``: every ``freq`` train iterations, the learner's metric path written to every writer.

Every ``freq`` iterations (``train_iter % freq == 0``) it measures the throughput since the previous log
(``throughput/iters_per_sec``, ``throughput/env_steps_per_sec``) and calls
:meth:`~rlearn.learner.BaseLearner.log_metrics` with it: the statistics of every monitored key
(``<key>_avg``...) go to each of ``learner.writers`` -- the table in the log and the TensorBoard curves by
default (docs/reading-the-logs.md, docs/writers.md). The hook writes nothing itself.

In a multi-process run ``log_metrics`` merges every rank's window statistics **by presence** (one
``all_gather`` per log on every rank, so every rank must reach the log at the same ``train_iter``); only
rank 0 has writers. See docs/distributed.md.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional, Tuple

from rlearn import trace
from rlearn.hooks.base import Hook, Priority
from rlearn.registry import HOOKS
from rlearn.writers.base import ScalarValue
from rlearn.writers.table import EMPTY, TableWriter, column_width, format_value, horizontal_tables  # noqa: F401

__all__ = ["LogShowHook", "THROUGHPUT_KEYS", "format_value", "horizontal_tables", "column_width"]

#: the throughput names written beside the statistics (TensorBoard: ``throughput_iter/...``, ``throughput_step/...``)
THROUGHPUT_KEYS = ("throughput/iters_per_sec", "throughput/env_steps_per_sec")


@HOOKS.register
class LogShowHook(Hook):
    """Periodic log of the learner's metrics to every writer (table, TensorBoard...).

    Args:
        freq: iterations between two logs; None uses the learner's ``log_freq``.
        width: width of the learner's :class:`~rlearn.writers.TableWriter` tables in characters; None
            leaves them at the terminal width.

    Default priority ``BELOW_NORMAL`` (60): after the timer and LR scheduler hooks, before
    ``CheckpointHook`` (``LOW``), so a checkpoint contains the points of its own log.

    Warning (through ``learner.logger``, rank 0): a *declared* key that has never been reported is
    warned about once, naming where it is declared (``learner.monitor_var_owner``), at the first log at
    which both (a) at least two logs have been written and (b) ``train_iter`` has reached the key's own
    window size, or at the end of the run if (b) holds by then. A key reported less often than ``freq``
    (with a window that fits its period, as its table needs anyway) is thus never flagged before it
    could have appeared. Non-finite values are counted and warned about by ``log_metrics``.
    """

    DEFAULT_PRIORITY = Priority.BELOW_NORMAL

    def __init__(self, freq: Optional[int] = None, width: Optional[int] = None) -> None:
        if freq is not None and (isinstance(freq, bool) or not isinstance(freq, int) or freq < 1):
            raise ValueError(f"LogShowHook freq must be a positive int or None, got {freq!r}")
        if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 20):
            raise ValueError(f"LogShowHook width must be an int >= 20 or None, got {width!r}")
        self.freq = freq
        self.width = width
        self.logs = 0
        self._warned_never: set = set()
        self._since: Optional[Tuple[float, int, int]] = None  # (time, train_iter, envstep) of the previous log

    # ------------------------------------------------------------------------------------ mount points
    def before_run(self, learner: Any) -> None:
        self._since = (time.perf_counter(), learner.train_iter, learner.envstep)

    def after_iter(self, learner: Any) -> None:
        freq = self.freq if self.freq is not None else learner.cfg["log_freq"]
        if self._since is None:  # train() called without before_run: measure from the first iteration seen
            self._since = (time.perf_counter(), learner.train_iter - 1, learner.envstep)
        if self.every_n_iters(learner, freq):
            self.log(learner)

    def after_run(self, learner: Any) -> None:
        if learner.rank != 0:
            return
        if self.logs >= 1:
            self._warn_never_reported(learner)
        learner.close()  # flushes and closes the writers; a later write opens new files

    # ---------------------------------------------------------------------------------------- logging
    def log(self, learner: Any, end: Optional[int] = None) -> Dict[str, ScalarValue]:
        """Write the throughput and the metric statistics to every writer; returns what was written.

        ``end``: the last monitor tick the windows cover (None: the current tick; see :meth:`final_log`).
        In a multi-process run every rank must call it at the same iteration (the statistics are gathered);
        ranks without writers return the same values and write nothing.
        """
        throughput = self._throughput(learner)
        if self.width is not None:
            for writer in learner.writers:
                if isinstance(writer, TableWriter):
                    writer.width = self.width
        values = learner.log_metrics(end=end, extra=throughput)
        if learner.rank == 0:
            self.logs += 1
            if self.logs >= 2:
                self._warn_never_reported(learner)
        return values

    def final_log(self, learner: Any) -> Dict[str, ScalarValue]:
        """The last log of a run, called after the loop has ended (after the last iteration's tick): its
        windows end at the last completed iteration (``learner.last_tick()``), so it covers exactly its
        window like every other log."""
        return self.log(learner, end=learner.last_tick())

    def _throughput(self, learner: Any) -> Dict[str, ScalarValue]:
        now = time.perf_counter()
        iters_per_sec = env_per_sec = None
        if self._since is not None:
            elapsed = now - self._since[0]
            if elapsed > 0:
                iters_per_sec = (learner.train_iter - self._since[1]) / elapsed
                env_per_sec = (learner.envstep - self._since[2]) / elapsed
        self._since = (now, learner.train_iter, learner.envstep)
        if iters_per_sec is not None:
            trace.counter("iters_per_s", iters_per_sec)
            trace.counter("env_steps_per_s", env_per_sec)
        return dict(zip(THROUGHPUT_KEYS, (iters_per_sec, env_per_sec)))

    def _warn_never_reported(self, learner: Any) -> None:
        for key in learner.monitor_vars():
            if key in self._warned_never or learner.ever_reported(key):
                continue
            if learner.train_iter < learner.monitor.window_size(key):
                continue  # its own window has not elapsed yet: it may simply not be due
            self._warned_never.add(key)
            learner.logger.warning(
                "declared monitor key %r has never been reported after %d iterations: it shows %r and gets no "
                "TensorBoard point. It is declared by %s: if it is never produced, remove it there; if it is "
                "reported rarely, give it a window of at least its period (learner.monitor_windows).",
                key,
                learner.train_iter,
                EMPTY,
                learner.monitor_var_owner(key),
            )

    # ------------------------------------------------------------------------------------------ state
    def state_dict(self) -> Dict[str, Any]:
        """Number of logs so far and the keys already warned about (so a resumed run does not repeat)."""
        return {"logs": self.logs, "warned_never": sorted(self._warned_never)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.logs = int(state["logs"])
        self._warned_never = set(state["warned_never"])
