"""``LogShowHook``: every ``freq`` train iterations, the learner's metric path written to every writer.

Every ``freq`` iterations (``train_iter % freq == 0``) it measures the throughput since the previous log
(``throughput/iters_per_sec``, ``throughput/env_steps_per_sec``) over *train time*: the wall time since the
previous log minus the time spent evaluating (``before_eval`` .. ``after_eval``, the evaluation's ``best.pt``
and video included), saving checkpoints (from ``before_save_checkpoint`` to the loop's next phase) and
writing the previous log itself. The time left out is shown beside it, as ``time/eval_s`` and
``time/checkpoint_s`` (seconds in the interval). With tracing on, the two throughput numbers become trace
counters of the same names, stamped at the start of the interval they measure. It then calls
:meth:`~rlearn.learner.BaseLearner.log_metrics` with them: the statistics of every monitored key
(``<key>_avg``...) go to each of ``learner.writers`` -- the table in the log, the TensorBoard curves and
``metrics.jsonl`` by default (docs/reading-the-logs.md, docs/writers.md). The hook writes nothing itself.

In a multi-process run ``log_metrics`` merges every rank's window statistics **by presence** (one
``all_gather`` per log on every rank, so every rank must reach the log at the same ``train_iter``); only
rank 0 has writers. See docs/distributed.md.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from rlearn import trace
from rlearn.hooks.base import Hook, Priority
from rlearn.registry import HOOKS
from rlearn.trace.recorder import MONOTONIC_CLOCK
from rlearn.writers.base import ScalarValue
from rlearn.writers.table import EMPTY, TableWriter, column_width, format_value, horizontal_tables  # noqa: F401

__all__ = ["LogShowHook", "THROUGHPUT_KEYS", "PAUSE_KEYS", "format_value", "horizontal_tables", "column_width"]

#: the throughput names written beside the statistics (TensorBoard: ``throughput_iter/...``, ``throughput_step/...``)
THROUGHPUT_KEYS = ("throughput/iters_per_sec", "throughput/env_steps_per_sec")
#: what the throughput leaves out: pause kind -> the name of its seconds in the interval (written after the throughput)
PAUSE_KEYS = {"eval": "time/eval_s", "checkpoint": "time/checkpoint_s"}


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
    window size and the period the policy declares for it (``Policy.monitor_periods``: PPG's auxiliary
    losses every ``n_pi`` iterations), or at the end of the run if (b) holds by then. A key reported less
    often than ``freq`` is thus never flagged before it could have appeared. The warning says what the
    writers that are on show for it (the table ``-``, no point elsewhere). Non-finite values are counted
    and warned about by ``log_metrics``.
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
        # (perf_counter_ns, train_iter, envstep) of the end of the previous log, and the paused time since then
        self._since: Optional[Tuple[int, int, int]] = None
        self._paused_ns: Dict[str, int] = dict.fromkeys(PAUSE_KEYS, 0)
        self._pause: Optional[Tuple[str, int]] = None  # (kind, start) of the pause going on

    # ------------------------------------------------------------------------------------ mount points
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
            self._warn_never_reported(learner)
        learner.close()  # flushes and closes the writers; a later write opens new files

    def _pause_clock(self, kind: str) -> None:
        """Stop counting time towards the throughput until :meth:`_resume_clock`; the time goes to ``kind``
        (``"eval"``, ``"checkpoint"``). Inside a pause (``best.pt`` saved by an evaluation) nothing changes."""
        if self._pause is None:
            self._pause = (kind, MONOTONIC_CLOCK())

    def _resume_clock(self) -> None:
        if self._pause is not None:
            kind, start = self._pause
            self._paused_ns[kind] += MONOTONIC_CLOCK() - start
            self._pause = None

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
        # the next interval starts once this log is written: writing it is not train time either
        self._since = (MONOTONIC_CLOCK(), learner.train_iter, learner.envstep)
        if learner.rank == 0:
            self.logs += 1
            if self.logs >= 2:
                self._warn_never_reported(learner)
        return values

    def final_log(self, learner: Any) -> Optional[Dict[str, ScalarValue]]:
        """The last log of a run, called after the loop has ended (after the last iteration's tick).

        It writes only if iterations completed since the previous log (or since ``before_run``): a run
        that ends exactly on a log iteration (or a resumed run with nothing left to do) gets no second log
        of that iteration, and None is returned. Otherwise its windows end at the last completed iteration
        (``learner.last_tick()``), so it covers exactly its window like every other log (a window of
        ``log_freq`` iterations at iteration 2001 covers 1902..2001), and its throughput covers the train
        time since the previous log (the final evaluation left out)."""
        if self._since is None or learner.train_iter == self._since[1]:
            return None
        return self.log(learner, end=learner.last_tick())

    def _throughput(self, learner: Any) -> Dict[str, ScalarValue]:
        """Iterations and env steps per second of train time since the previous log (None for the first
        log of a hook that never saw ``before_run``), then the seconds left out of it (:data:`PAUSE_KEYS`);
        also trace counters stamped at the interval start."""
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

    def _warn_never_reported(self, learner: Any) -> None:
        periods = _report_periods(learner.policy)
        for key in learner.monitor_vars():
            if key in self._warned_never or learner.ever_reported(key):
                continue
            if learner.train_iter < max(learner.monitor.window_size(key), periods.get(key, 1)):
                continue  # its own window, or the period the policy declares, has not elapsed yet: it may not be due
            self._warned_never.add(key)
            owner = learner.monitor_var_owner(key)
            period_hint = (f"declare its period in {type(learner.policy).__name__}._monitor_periods_learn() and "
                           if owner.endswith("._monitor_vars_learn()") else "")
            learner.logger.warning(
                "declared monitor key %r has never been reported after %d iterations: %s. It is declared by %s: "
                "if it is never produced, remove it there; if it is reported rarely, %sgive it a window of at "
                "least its period (learner.monitor_windows).",
                key, learner.train_iter, _where_missing(learner.writers), owner, period_hint,
            )

    # ------------------------------------------------------------------------------------------ state
    def state_dict(self) -> Dict[str, Any]:
        """Number of logs so far and the keys already warned about (so a resumed run does not repeat)."""
        return {"logs": self.logs, "warned_never": sorted(self._warned_never)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.logs = int(state["logs"])
        self._warned_never = set(state["warned_never"])


def _report_periods(policy: Any) -> Dict[str, int]:
    """The policy's declared report periods (``Policy.monitor_periods``: key -> iterations), if it has any."""
    periods = getattr(policy, "monitor_periods", None)
    return dict(periods()) if callable(periods) else {}


def _where_missing(writers: Any) -> str:
    """What a key without a value looks like in the writers that are on: ``the table (TableWriter) shows
    '-'; TensorBoardWriter, JsonlWriter write no point for it``."""
    tables = [writer.name for writer in writers if isinstance(writer, TableWriter)]
    others = [writer.name for writer in writers if not isinstance(writer, TableWriter)]
    parts = [f"the table ({', '.join(tables)}) shows {EMPTY!r}"] if tables else []
    if others:
        parts.append(f"{', '.join(others)} write no point for it")
    return "; ".join(parts) if parts else "no writer is on (learner.writers), so it is shown nowhere"
