"""``LogShowHook``: the periodic table in the log and the TensorBoard curves.

Every ``freq`` train iterations (``train_iter % freq == 0``) it prints a horizontal table (names across,
values below, split into several tables to fit the terminal width) with ``train_iter``, ``envstep``, the
throughput since the previous table, and ``<key>_avg`` for every monitored key; and it writes, for every
key whose window holds a value, ``learner_iter/<key>_avg`` at step = ``train_iter`` and
``learner_step/<key>_avg`` at step = ``envstep`` (a grouped key ``g/k`` goes to ``g_iter/k_avg`` and
``g_step/k_avg``). See docs/reading-the-logs.md.

In a multi-process run (``torch.distributed`` initialised) every rank's window statistics are merged
**by presence** before the table is printed: one ``all_gather`` per log on every rank (so every rank
must reach the log at the same ``train_iter``), then rank 0 alone prints and writes TensorBoard. A key
reported by 3 of 4 ranks is averaged over the values of those 3. See docs/distributed.md.
"""

from __future__ import annotations

import math
import shutil
import time
from typing import Any, Dict, List, Optional, Tuple

from tabulate import tabulate

from rlearn.distributed import WindowStat, all_gather_object, is_distributed, local_window_stats, merge_window_stats
from rlearn.hooks.base import Hook, Priority
from rlearn import trace
from rlearn.registry import HOOKS

__all__ = ["LogShowHook", "tb_tags", "format_value", "horizontal_tables", "column_width"]

#: shown for a key whose window holds no (finite) value
EMPTY = "-"


def tb_tags(key: str, suffix: str = "_avg") -> Tuple[str, str]:
    """``(iteration-axis tag, env-step-axis tag)`` of a monitor key: ``learner_iter/loss_avg`` and
    ``learner_step/loss_avg`` for ``loss``; ``collector_iter/episode_return_avg``... for a grouped key."""
    group, sep, name = key.partition("/")
    if not sep:
        group, name = "learner", key
    return f"{group}_iter/{name}{suffix}", f"{group}_step/{name}{suffix}"


def format_value(value: Any) -> str:
    """Table text of one value: ints as they are, floats with 6 significant digits, None as ``-``."""
    if value is None:
        return EMPTY
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.6g}"


def _grid(columns: List[Tuple[str, str]]) -> str:
    return tabulate(
        [[value for _, value in columns]],
        headers=[name for name, _ in columns],
        tablefmt="grid",
        disable_numparse=True,
        stralign="right",
    )


def column_width(column: Tuple[str, str]) -> int:
    """Characters one ``(name, value)`` column takes in a grid table: its cells plus one border.

    ASCII text is measured directly, as tabulate's grid format draws it (a header gets two characters of
    minimum padding; then a space on each side and the border); other text is rendered with tabulate,
    which knows wide characters.
    """
    name, value = column
    if name.isascii() and value.isascii():
        return max(len(name) + 2, len(value)) + 3
    return len(_grid([column]).split("\n", 1)[0]) - 1


def horizontal_tables(columns: List[Tuple[str, str]], width: int) -> str:
    """Render ``(name, value)`` columns as grid tables of one row, as many as needed to fit ``width``.

    Columns keep their order and are cut into consecutive groups by their rendered widths
    (:func:`column_width`). A column wider than ``width`` on its own gets a table of its own.
    """
    chunks: List[List[Tuple[str, str]]] = []
    current: List[Tuple[str, str]] = []
    used = 1  # the left border
    for column in columns:
        need = column_width(column)
        if current and used + need > width:
            chunks.append(current)
            current, used = [], 1
        current.append(column)
        used += need
    if current:
        chunks.append(current)
    return "\n".join(_grid(chunk) for chunk in chunks)


@HOOKS.register
class LogShowHook(Hook):
    """Periodic table + TensorBoard scalars of the learner's monitor.

    Args:
        freq: iterations between two logs; None uses the learner's ``log_freq``.
        tensorboard: write TensorBoard scalars (through ``learner.tb_writer``, rank 0 only).
        width: table width in characters; None uses the terminal width (``shutil.get_terminal_size``).

    Default priority ``BELOW_NORMAL`` (60): after the timer and LR scheduler hooks, before
    ``CheckpointHook`` (``LOW``), so a checkpoint contains the points of its own log.

    Warnings (through ``learner.logger``):

    * a *declared* key that has never been reported by the second log (or by the end of the run, if
      only one log happened) is warned about once: its column stays ``-``. Waiting for the second log
      gives keys reported less often than ``freq`` a chance;
    * non-finite values (NaN, inf) in the window are excluded from ``<key>_avg`` and counted in a
      ``<key>_nonfinite`` column, also written to TensorBoard, and a warning names the keys.
    """

    DEFAULT_PRIORITY = Priority.BELOW_NORMAL

    def __init__(self, freq: Optional[int] = None, tensorboard: bool = True, width: Optional[int] = None) -> None:
        if freq is not None and (isinstance(freq, bool) or not isinstance(freq, int) or freq < 1):
            raise ValueError(f"LogShowHook freq must be a positive int or None, got {freq!r}")
        if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 20):
            raise ValueError(f"LogShowHook width must be an int >= 20 or None, got {width!r}")
        self.freq = freq
        self.tensorboard = bool(tensorboard)
        self.width = width
        self.logs = 0
        self._warned_never: set = set()
        self._since: Optional[Tuple[float, int, int]] = None  # (time, train_iter, envstep) of the previous log
        self._reported_anywhere: set = set()  # declared keys some rank has reported (multi-process runs)

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
        learner.close_tb_writer()  # flushes; a later write opens a new event file

    # ---------------------------------------------------------------------------------------- logging
    def keys(self, learner: Any) -> List[str]:
        """Declared keys, then keys recorded without being declared, in first-seen order."""
        declared = learner.monitor_vars()
        seen = set(declared)
        return declared + [key for key in learner.monitor.keys() if key not in seen]

    def log(self, learner: Any) -> str:
        """Print the table, write TensorBoard points and return the table text (empty on ranks > 0).

        In a multi-process run every rank must call it at the same iteration (it gathers the ranks'
        window statistics); in a single process it reads the monitor directly.
        """
        if is_distributed():
            averages, nonfinite = self._merged_statistics(learner)  # collective: before any rank returns
            if learner.rank != 0:
                return ""
        else:
            if learner.rank != 0:
                return ""
            averages, nonfinite = self._local_statistics(learner)
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

        columns: List[Tuple[str, str]] = [
            ("train_iter", str(learner.train_iter)),
            ("envstep", str(learner.envstep)),
            ("iters/s", format_value(iters_per_sec)),
            ("env_steps/s", format_value(env_per_sec)),
        ]
        for key, value in averages.items():
            columns.append((f"{key}_avg", format_value(value)))
            if key in nonfinite:
                columns.append((f"{key}_nonfinite", str(nonfinite[key])))
        self.logs += 1

        width = self.width if self.width is not None else shutil.get_terminal_size((120, 24)).columns
        table = horizontal_tables(columns, width)
        learner.logger.info("train_iter %d\n%s", learner.train_iter, table)
        if nonfinite:
            learner.logger.warning(
                "non-finite values (NaN/inf) in the window, excluded from the averages: %s",
                ", ".join(f"{key}: {count}" for key, count in nonfinite.items()),
            )
        if self.logs >= 2:
            self._warn_never_reported(learner)

        writer = learner.tb_writer if self.tensorboard else None
        if writer is not None:
            for key, value in averages.items():
                if value is not None:
                    self._add_both_axes(writer, key, "_avg", value, learner)
            for key, count in nonfinite.items():
                self._add_both_axes(writer, key, "_nonfinite", count, learner)
            for name, value in (("iters_per_sec", iters_per_sec), ("env_steps_per_sec", env_per_sec)):
                if value is not None:
                    writer.add_scalar(f"throughput_iter/{name}", value, learner.train_iter)
                    writer.add_scalar(f"throughput_step/{name}", value, learner.envstep)
            writer.flush()
        return table

    def _local_statistics(self, learner: Any) -> Tuple[Dict[str, Optional[float]], Dict[str, int]]:
        """``(key -> window average or None, key -> non-finite count where > 0)`` of this process."""
        monitor = learner.monitor
        averages: Dict[str, Optional[float]] = {}
        nonfinite: Dict[str, int] = {}
        for key in self.keys(learner):
            averages[key] = monitor.avg(key)
            bad = monitor.nonfinite(key)
            if bad:
                nonfinite[key] = bad
        return averages, nonfinite

    def _merged_statistics(self, learner: Any) -> Tuple[Dict[str, Optional[float]], Dict[str, int]]:
        """Like :meth:`_local_statistics`, merged over all ranks by presence with ONE ``all_gather``.

        Each rank sends its :class:`~rlearn.distributed.WindowStat` per key with values in the window, plus the
        declared keys it has ever reported (for the never-reported warning). Keys come in rank 0's order,
        then keys only other ranks recorded.
        """
        keys = self.keys(learner)
        monitor = learner.monitor
        newly_reported = [k for k in learner.monitor_vars() if k not in self._reported_anywhere and monitor.last(k) is not None]
        gathered = all_gather_object((local_window_stats(monitor, keys), newly_reported))
        merged: Dict[str, WindowStat] = merge_window_stats([stats for stats, _ in gathered])
        for _, reported in gathered:
            self._reported_anywhere.update(reported)
        ordered = keys + [key for key in merged if key not in set(keys)]
        averages = {key: merged[key].avg if key in merged else None for key in ordered}
        nonfinite = {key: merged[key].nonfinite for key in ordered if key in merged and merged[key].nonfinite}
        return averages, nonfinite

    @staticmethod
    def _add_both_axes(writer: Any, key: str, suffix: str, value: float, learner: Any) -> None:
        iter_tag, step_tag = tb_tags(key, suffix)
        writer.add_scalar(iter_tag, value, learner.train_iter)
        writer.add_scalar(step_tag, value, learner.envstep)

    def _warn_never_reported(self, learner: Any) -> None:
        monitor = learner.monitor
        for key in learner.monitor_vars():
            if key in self._warned_never or key in self._reported_anywhere:
                continue
            if monitor.last(key) is None:
                self._warned_never.add(key)
                learner.logger.warning(
                    "declared monitor key %r has never been reported after %d iterations: it shows %r and "
                    "gets no TensorBoard point. If the policy never returns it, remove it from "
                    "_monitor_vars_learn(); if it is reported rarely, it will appear once it is.",
                    key,
                    learner.train_iter,
                    EMPTY,
                )

    # ------------------------------------------------------------------------------------------ state
    def state_dict(self) -> Dict[str, Any]:
        """Number of logs so far and the keys already warned about (so a resumed run does not repeat)."""
        return {"logs": self.logs, "warned_never": sorted(self._warned_never)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.logs = int(state["logs"])
        self._warned_never = set(state["warned_never"])
