"""The learner's half of the metric path: declared keys, recording, statistics and writers.

:class:`MetricPath` is a mixin of :class:`~rlearn.learner.BaseLearner`, kept apart so that the path reads
in one place::

    train() / record() / record_collect()  ->  monitor (TickMonitor)
    log_metrics()                          ->  statistics (LogProcessor), merged over ranks by presence
                                           ->  write_scalars() -> every writer (TableWriter, TensorBoardWriter...)
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from rlearn.distributed import WindowStat, all_gather_object, is_distributed, merge_window_stats
from rlearn.writers import Writer
from rlearn.writers.base import ScalarValue

__all__ = ["MetricPath", "call_writers", "unique_names"]


def unique_names(objects: Iterable[Any], name: Callable[[Any], str]) -> Dict[str, Any]:
    """``{name(obj): obj}`` in order, a repeated name getting the suffix ``.2``, ``.3``..."""
    named: Dict[str, Any] = {}
    for obj in objects:
        key, suffix = name(obj), 2
        while key in named:
            key, suffix = f"{name(obj)}.{suffix}", suffix + 1
        named[key] = obj
    return named


def call_writers(owner: Any, method: str, *args: Any) -> None:
    """``writer.<method>(*args)`` on every writer of ``owner.writers``.

    A writer that raises ``Exception`` (a full disk, a tracking service's error) is reported once on
    ``owner.logger`` with its traceback, closed as far as it can be, removed from ``owner.writers`` and listed
    in ``owner.failed_writers`` (where it has one); the run and the other writers go on.
    """
    for writer in list(owner.writers):
        try:
            getattr(writer, method)(*args)
        except Exception as exc:  # noqa: BLE001 - any writer error: disable that writer only
            if writer in owner.writers:
                owner.writers.remove(writer)
            failed = getattr(owner, "failed_writers", None)
            if failed is not None:
                failed[writer.name] = f"{type(exc).__name__}: {exc}"
            owner.logger.error(
                "writer %s failed in %s (%s: %s): it is disabled for the rest of this run; training and the "
                "other writers go on (the checkpoints still hold every number's state)", writer.name, method,
                type(exc).__name__, exc, exc_info=exc,
            )
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - it already failed; release what can be released
                pass


class MetricPath:
    """Monitor keys, recording and the statistics -> writers end of the metric path (see the module doc)."""

    # --------------------------------------------------------------------------------- monitor vars
    def _learner_lr_keys(self) -> Dict[str, str]:
        """optimizer name -> the learner's own lr key (empty if the policy reports its own cur_lr*)."""
        if any(key.startswith("cur_lr") for key in self._policy_vars):
            return {}
        names = list(self.policy.optimizers())
        if len(names) == 1:
            return {names[0]: "cur_lr"}
        return {name: f"cur_lr_{name}" for name in names}

    def monitor_vars(self) -> List[str]:
        """Declared monitor keys in declaration order: the policy's (learn keys, then its collect keys as
        ``collector/<key>``), the learner's ``cur_lr`` keys, then those declared by hooks and the
        pipeline (:meth:`declare_monitor_vars`)."""
        return self._policy_vars + list(self._lr_keys.values()) + self._extra_vars

    def monitor_var_owner(self, key: str) -> str:
        """Where ``key`` is declared, for messages: ``<Policy>._monitor_vars_learn()``,
        ``<Policy>._monitor_vars_collect()`` (keys ``collector/<k>`` the policy declared), ``the learner``
        (its ``cur_lr`` keys) or ``learner.declare_monitor_vars()`` (keys of hooks and the pipeline)."""
        policy = type(self.policy).__name__
        if key in self._collect_vars:
            return f"{policy}._monitor_vars_collect()"
        if key in self._policy_vars:
            return f"{policy}._monitor_vars_learn()"
        if key in self._lr_keys.values():
            return "the learner"
        return "learner.declare_monitor_vars()"

    def ever_reported(self, key: str) -> bool:
        """True once ``key`` has had a value in this process, or (multi-process) on any rank as of the last
        :meth:`log_metrics`."""
        return key in self._reported_anywhere or self.monitor.last(key) is not None

    def declare_monitor_vars(self, keys: Iterable[str]) -> None:
        """Declare keys recorded by hooks or the pipeline (``data_time``, ``collector/episode_return``...).

        Declaring a key twice is harmless. Keys must be non-empty strings (TypeError otherwise).
        """
        keys = [keys] if isinstance(keys, str) else list(keys)
        for key in keys:
            if not isinstance(key, str) or not key:
                raise TypeError(f"monitor keys must be non-empty strings, got {key!r}")
        for key in keys:
            if key not in self._declared:
                self._declared.add(key)
                self._extra_vars.append(key)

    # --------------------------------------------------------------------------------------- record
    def record(self, info: Mapping[str, Any]) -> None:
        """Record ``info`` (keys of hooks or the pipeline) at the current tick.

        An undeclared key is still recorded, with one warning per key saying to declare it with
        :meth:`declare_monitor_vars`; with ``strict=True`` it is a ``ValueError`` and nothing of ``info`` is
        recorded. A bad value is a ``TypeError`` naming the key, also recording nothing.
        """
        self._record(info, "learner.declare_monitor_vars()")

    def record_collect(self, metrics: Mapping[str, Any]) -> None:
        """Record the policy's collect-side metrics (``CollectResult.metrics``) at the current tick, as
        ``collector/<key>``.

        Each key maps to one scalar or to the list of values of one collect call (each a value of the
        window). Undeclared keys are handled as in :meth:`record`; a bad value records nothing of ``metrics``.
        """
        if not isinstance(metrics, Mapping):
            raise TypeError(f"learner.record_collect expects a dict key -> values, got {type(metrics).__name__}")
        columns = {
            f"collector/{key}": list(values) if isinstance(values, (list, tuple)) else [values]
            for key, values in metrics.items()
        }
        owner = f"{type(self.policy).__name__}._monitor_vars_collect()"
        undeclared = self._check_declared(columns, owner)
        self.monitor.update_columns(columns)  # all-or-nothing, like record()
        self._warn_undeclared(undeclared, owner)

    def _check_declared(self, info: Mapping[str, Any], owner: str) -> List[str]:
        if not isinstance(info, Mapping):
            raise TypeError(f"learner.record expects a dict of scalars, got {type(info).__name__}")
        undeclared = [key for key in info if key not in self._declared]
        if undeclared and self.cfg["strict"]:
            raise ValueError(
                f"undeclared monitor key(s) {', '.join(repr(k) for k in undeclared)} (strict mode): add them "
                f"to {owner}; nothing of this update was recorded"
            )
        return undeclared

    def _record(self, info: Mapping[str, Any], owner: str) -> None:
        """Record ``info``; an undeclared key warns once, telling to add it to ``owner``."""
        if type(info) is dict and info.keys() <= self._declared:  # every key declared: nothing to check or warn
            self.monitor.update(info)
            return
        undeclared = self._check_declared(info, owner)
        self.monitor.update(info)
        self._warn_undeclared(undeclared, owner)

    def _warn_undeclared(self, undeclared: List[str], owner: str) -> None:
        for key in undeclared:
            if key not in self._warned_undeclared:
                self._warned_undeclared.add(key)
                self.logger.warning(
                    "monitor key %r is not declared: it is recorded and shown, but add it to %s", key, owner
                )

    # ------------------------------------------------------------------------------------ metric path
    def last_tick(self) -> int:
        """The monitor tick of the last completed iteration: the current tick inside ``after_iter`` hooks,
        the one before it once :meth:`train` has returned (its tick is done). A window ending there covers
        the last iterations that really ran; the final log of a run uses it."""
        return self.monitor.tick_count if self._tick_pending else self.monitor.tick_count - 1

    def metric_keys(self, keys: Union[None, str, Sequence[str]] = None) -> List[str]:
        """The monitor keys a log shows: None: every declared key (:meth:`monitor_vars`) then every key
        recorded without being declared (first-seen order); a str: those of them that start with it (a
        group such as ``"collector/"``); a list: exactly those keys."""
        if keys is not None and not isinstance(keys, str):
            return list(keys)
        declared = self.monitor_vars()
        seen = set(declared)
        every = declared + [key for key in self.monitor.keys() if key not in seen]
        return every if keys is None else [key for key in every if key.startswith(keys)]

    def _window_stats(self, keys: List[str], end: Optional[int]) -> Dict[str, WindowStat]:
        """Window statistics of ``keys``, merged over the ranks by presence in a multi-process run (one
        ``all_gather`` that every rank must reach)."""
        self.statistics.prepare(self.monitor)  # idempotent: windows its entries need beyond the keys' own
        local = self.statistics.window_stats(self.monitor, keys, end=end)
        if not is_distributed():
            return local
        monitor = self.monitor
        newly = [k for k in self.monitor_vars() if k not in self._reported_anywhere and monitor.last(k) is not None]
        gathered = all_gather_object((local, newly))
        for _, reported in gathered:
            self._reported_anywhere.update(reported)
        return merge_window_stats([stats for stats, _ in gathered])

    def log_metrics(
        self,
        keys: Union[None, str, Sequence[str]] = None,
        end: Optional[int] = None,
        extra: Optional[Mapping[str, ScalarValue]] = None,
    ) -> Dict[str, ScalarValue]:
        """Run the metric path for ``keys`` and write the result to every writer; returns what was written.

        monitor windows -> :attr:`statistics` (``<key>_avg``, ``<key>_nonfinite``) -> merged over ranks
        -> ``extra`` (e.g. throughput) first, then the statistics -> :meth:`write_scalars`. ``keys`` as in
        :meth:`metric_keys`; ``end`` is the last monitor tick the windows cover (None: the current one; see
        :meth:`last_tick`). In a multi-process run every rank must call it at the same iteration.
        """
        values: Dict[str, ScalarValue] = dict(extra or {})
        shown = self.statistics.values(self._window_stats(self.metric_keys(keys), end))
        values.update(shown)
        nonfinite = {name[: -len("_nonfinite")]: count for name, count in shown.items() if name.endswith("_nonfinite")}
        if nonfinite and self.rank == 0:
            self.logger.warning(
                "non-finite values (NaN/inf) in the window, excluded from the averages: %s",
                ", ".join(f"{key}: {count}" for key, count in nonfinite.items()),
            )
        self.write_scalars(values)
        return values

    def write_scalars(
        self, scalars: Mapping[str, ScalarValue], step_iter: Optional[int] = None, step_env: Optional[int] = None
    ) -> None:
        """Hand ``scalars`` (final names, e.g. ``evaluator/episode_return_mean``) to every writer at
        (``step_iter``, ``step_env``), default (``train_iter``, ``envstep``), and flush them."""
        step_iter = self.train_iter if step_iter is None else step_iter
        step_env = self.envstep if step_env is None else step_env
        call_writers(self, "write_scalars", scalars, step_iter, step_env)  # needs only writers and logger
        call_writers(self, "flush")

    def _write(self, method: str, *args: Any) -> None:
        """``writer.<method>(*args)`` then ``flush()`` on every writer (:func:`call_writers`)."""
        call_writers(self, method, *args)
        call_writers(self, "flush")

    def write_text(self, tag: str, text: str, step_iter: Optional[int] = None) -> None:
        """Hand a text to every writer at ``step_iter`` (default ``train_iter``)."""
        step_iter = self.train_iter if step_iter is None else step_iter
        self._write("write_text", tag, text, step_iter)

    def write_video(self, name: str, frames: Sequence[Any], fps: float, step_iter: Optional[int] = None,
                    step_env: Optional[int] = None) -> None:
        """Hand a recorded episode (H x W x 3 uint8 ``frames`` at ``fps``) to every writer under ``name``
        (``evaluator/video``) at (``step_iter``, ``step_env``), default (``train_iter``, ``envstep``);
        TensorBoard shows it, the other default writers ignore it."""
        step_iter = self.train_iter if step_iter is None else step_iter
        step_env = self.envstep if step_env is None else step_env
        self._write("write_video", name, frames, fps, step_iter, step_env)

    def write_config(self, config: Optional[Mapping[str, Any]] = None, step_iter: Optional[int] = None) -> None:
        """Hand the run's resolved config (default :attr:`run_config`) to every writer (TensorBoard text,
        W&B config, MLflow parameters); the run calls it when it starts or resumes."""
        config = self.run_config if config is None else config
        if config is None:
            return
        step_iter = self.train_iter if step_iter is None else step_iter
        self._write("write_config", config, step_iter)

    def write_hparams(self, metrics: Mapping[str, float], hparams: Optional[Mapping[str, Any]] = None) -> None:
        """Hand the hyper-parameters (default: :attr:`run_config` flattened to dotted keys) and the run's
        final ``metrics`` to every writer (TensorBoard's HParams tab); the run calls it when it ends."""
        if hparams is None:
            if self.run_config is None:
                return
            from rlearn.config import flatten

            hparams = flatten(self.run_config)
        self._write("write_hparams", hparams, dict(metrics), self.train_iter)

    def close(self) -> None:
        """Close every writer (a later write opens new files)."""
        call_writers(self, "close")

    def _stateful_writers(self) -> Dict[str, Writer]:
        return unique_names(self.writers, lambda writer: writer.name)
