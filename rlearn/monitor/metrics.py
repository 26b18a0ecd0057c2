"""``Metrics``: a learner's metric path, from "a policy returned a dict" to "the writers received rows"
(docs/architecture.md): key bookkeeping -> :class:`TickMonitor` windows; at a log, :class:`LogProcessor`
statistics -> :meth:`WindowStat.merge_ranks` (one ``all_gather`` in a multi-process run) -> the writers.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Union

from rlearn.distributed.utils import all_gather_object, is_distributed
from rlearn.monitor.scalars import check_key
from rlearn.monitor.statistics import LogProcessor
from rlearn.monitor.tick_monitor import TickMonitor
from rlearn.monitor.window import WindowStat
from rlearn.writers.base import ScalarValue, Writer, WriterFanout
from rlearn.writers.table import EMPTY, TableWriter

__all__ = ["Metrics", "IrregularKey", "irregular", "HOOK_OWNER"]

#: who declares the keys of :meth:`Metrics.declare` without an owner (hooks and the pipeline)
HOOK_OWNER = "learner.declare_monitor_vars()"


class IrregularKey(str):
    """A declared monitor key reported when something happens, with no period (see :func:`irregular`)."""


def irregular(key: str) -> IrregularKey:
    """Mark ``key`` as irregular where it is declared (``_monitor_vars_learn``, ``_monitor_vars_collect``,
    ``declare_monitor_vars``): reported only when something happens (a clipped gradient's norm), so it is
    never called "never reported"; it shows as ``-`` while it has no value."""
    return IrregularKey(check_key(key))


class Metrics:
    """Declared keys, recording, statistics, the rank merge and the writers of one learner.

    Args:
        monitor: the store (one tick per train iteration).
        statistics: which statistics of each key are shown (``custom_cfg``).
        writers: where the rows go.
        logger: where the warnings go.
        strict: an undeclared key is a ``ValueError`` (nothing of the update recorded) instead of a warning.
        rank: warnings about the whole run are given on rank 0 only.
    """

    def __init__(self, monitor: TickMonitor, statistics: LogProcessor, writers: Iterable[Writer],
                 logger: logging.Logger, strict: bool = False, rank: int = 0) -> None:
        self.monitor, self.statistics, self.logger, self.strict, self.rank = monitor, statistics, logger, strict, rank
        self.writers = WriterFanout(writers, logger)
        self._owners: Dict[str, str] = {}  # declared key -> who declares it, in declaration order
        self._irregular: Set[str] = set()
        self.warned_undeclared: Set[str] = set()
        self.warned_never: Set[str] = set()
        self._reported_anywhere: Set[str] = set()  # declared keys some rank has reported (multi-process runs)
        statistics.prepare(monitor)  # last_n rings and since-start sums fill from the first value

    # ------------------------------------------------------------------------------ key bookkeeping
    def declare(self, keys: Union[str, Iterable[str]], owner: str = HOOK_OWNER, irregular: bool = False) -> None:
        """Declare ``keys`` (declaring a key twice is harmless); an :class:`IrregularKey` or ``irregular=True``
        marks them as reported when something happens. A bad key raises ``TypeError``/``ValueError``, a key
        whose default name an entry of :attr:`statistics` takes ``LogProcessorConfigError``; nothing is declared then."""
        keys = [keys] if isinstance(keys, str) else list(keys)
        for key in keys:
            if not isinstance(key, str) or not key:
                raise TypeError(f"monitor keys must be non-empty strings, got {key!r}")
            check_key(key)
        self.statistics.check_keys([*self._owners, *keys])
        for key in keys:
            self._owners.setdefault(str(key), owner)
            if irregular or isinstance(key, IrregularKey):
                self._irregular.add(str(key))

    def keys(self) -> List[str]:
        """The declared keys, in declaration order."""
        return list(self._owners)

    def owner(self, key: str) -> str:
        """Who declares ``key`` (for messages)."""
        return self._owners.get(key, HOOK_OWNER)

    def irregular_keys(self) -> Set[str]:
        """The declared keys reported when something happens (no "never reported" warning)."""
        return set(self._irregular)

    def ever_reported(self, key: str) -> bool:
        """True once ``key`` has had a value in this process, or (multi-process) on any rank as of the last log."""
        return key in self._reported_anywhere or self.monitor.last(key) is not None

    # ------------------------------------------------------------------------------------ recording
    def record(self, info: Mapping[str, Any], owner: str = HOOK_OWNER, columns: bool = False) -> None:
        """Record ``info`` (``columns``: a list of values per key) at the current tick. An undeclared key is
        recorded, with one warning per key saying to add it to ``owner``; with ``strict`` it is a ``ValueError``
        and nothing of ``info`` is recorded (a bad value too, a ``TypeError`` naming the key)."""
        if not isinstance(info, Mapping):
            raise TypeError(f"learner.record expects a dict of scalars, got {type(info).__name__}")
        undeclared = [key for key in info if key not in self._owners]
        if undeclared and self.strict:
            raise ValueError(f"undeclared monitor key(s) {', '.join(map(repr, undeclared))} (strict mode): add them "
                             f"to {owner}; nothing of this update was recorded")
        (self.monitor.update_columns if columns else self.monitor.update)(info)
        for key in undeclared:
            if key not in self.warned_undeclared:
                self.warned_undeclared.add(key)
                self.logger.warning("monitor key %r is not declared: it is recorded and shown, but add it to %s", key, owner)

    # ---------------------------------------------------------------------------------------- log
    def metric_keys(self, keys: Union[None, str, Sequence[str]] = None) -> List[str]:
        """The keys a log shows: None: every declared key then every key recorded undeclared (first-seen
        order); a str: those of them that start with it (``"collector/"``); a list: exactly those keys."""
        if keys is not None and not isinstance(keys, str):
            return list(keys)
        every = list(self._owners)
        for key in self.monitor.keys():
            if key not in self._owners:
                every.append(key)
        return every if keys is None else [key for key in every if key.startswith(keys)]

    def window_stats(self, keys: List[str], end: Optional[int]) -> Dict[str, WindowStat]:
        """Window statistics of ``keys``, merged over the ranks by presence in a multi-process run (one
        ``all_gather`` that every rank must reach)."""
        self.statistics.prepare(self.monitor)  # idempotent: windows its entries need beyond the keys' own
        local = self.statistics.window_stats(self.monitor, keys, end=end)
        if not is_distributed():
            return local
        newly = [k for k in self._owners if k not in self._reported_anywhere and self.monitor.last(k) is not None]
        gathered = all_gather_object((local, newly))
        for _, reported in gathered:
            self._reported_anywhere.update(reported)
        return WindowStat.merge_ranks(stats for stats, _ in gathered)

    def log(self, step_iter: int, step_env: int, keys: Union[None, str, Sequence[str]] = None,
            end: Optional[int] = None, extra: Optional[Mapping[str, ScalarValue]] = None) -> Dict[str, ScalarValue]:
        """``extra`` (e.g. throughput) then the statistics of ``keys`` (:meth:`metric_keys`) over the windows
        ending at tick ``end`` (None: the current one), written to every writer at (``step_iter``,
        ``step_env``); returns what was written. Every rank must call it at the same iteration."""
        values: Dict[str, ScalarValue] = dict(extra or {})
        shown = self.statistics.values(self.window_stats(self.metric_keys(keys), end))
        values.update(shown)
        nonfinite = {name[: -len("_nonfinite")]: n for name, n in shown.items() if name.endswith("_nonfinite")}
        if nonfinite and self.rank == 0:
            self.logger.warning("non-finite values (NaN/inf) in the window, excluded from the averages: %s",
                                ", ".join(f"{key}: {count}" for key, count in nonfinite.items()))
        self.writers.write_scalars(values, step_iter, step_env)
        return values

    def warn_never_reported(self, train_iter: int, policy: Any) -> None:
        """Warn once per declared key that has had no value on any rank although ``train_iter`` has reached its
        window and the period ``policy.monitor_periods()`` declares for it; irregular keys are never warned about."""
        periods = getattr(policy, "monitor_periods", None)  # key -> iterations between reports
        periods = dict(periods()) if callable(periods) else {}
        for key in self._owners:
            if key in self.warned_never or key in self._irregular or self.ever_reported(key):
                continue
            if train_iter < max(self.monitor.window_size(key), periods.get(key, 1)):
                continue  # its own window, or the period the policy declares, has not elapsed yet: it may not be due
            self.warned_never.add(key)
            owner = self.owner(key)
            hint = (f"declare its period in {type(policy).__name__}._monitor_periods_learn() and "
                    if owner.endswith("_learn()") else "")
            self.logger.warning(
                "declared monitor key %r has never been reported after %d iterations: %s. It is declared by %s: if it "
                "is never produced, remove it there; if it is reported rarely, %sgive it a window of at least its "
                "period (learner.monitor_windows); if it is reported only when something happens, declare it as "
                "irregular(%r) (rlearn.monitor.irregular).", key, train_iter, self._where_missing(), owner, hint, key)

    def _where_missing(self) -> str:
        """What a key without a value looks like in the writers that are on."""
        writers = self.writers.writers
        tables = [writer.name for writer in writers if isinstance(writer, TableWriter)]
        others = [writer.name for writer in writers if not isinstance(writer, TableWriter)]
        parts = [f"the table ({', '.join(tables)}) shows {EMPTY!r}"] if tables else []
        if others:
            parts.append(f"{', '.join(others)} write no point for it")
        return "; ".join(parts) if parts else "no writer is on (learner.writers), so it is shown nowhere"

    # ---------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> Dict[str, Any]:
        """The monitor's windows, the keys declared by hooks and the keys already warned about."""
        return {"monitor": self.monitor.state_dict(),
                "warned_undeclared": sorted(self.warned_undeclared), "warned_never": sorted(self.warned_never),
                "extra_monitor_vars": [key for key, owner in list(self._owners.items()) if owner == HOOK_OWNER],
                "irregular_monitor_vars": sorted(self._irregular)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.monitor.load_state_dict(state["monitor"])
        self.warned_undeclared = set(state.get("warned_undeclared", ()))
        self.warned_never = set(state.get("warned_never", ()))
        for key in state.get("extra_monitor_vars", ()):
            self.declare([key], irregular=key in state.get("irregular_monitor_vars", ()))
