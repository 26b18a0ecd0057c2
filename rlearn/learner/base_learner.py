"""``BaseLearner``: one ``train(data, envstep)`` call is one train iteration of a policy.

The learner owns the counters (``train_iter``, ``envstep``), the :class:`~rlearn.monitor.TickMonitor`
that windows the metrics, the metric path's end (statistics -> ``writers``: table, TensorBoard...), the
hooks and the checkpoints. One iteration::

    envstep updated -> before_iter hooks -> policy._forward_learn(data) -> record cur_lr, then the info
    -> train_iter += 1 -> after_iter hooks (timer, LR scheduler, LogShowHook, CheckpointHook) -> tick
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Union

from rlearn.hooks.base import HookManager, build_hook
from rlearn.config import ConfigError, is_int, resolve_section, undeclared_window_warnings
from rlearn.learner.checkpoints import LearnerCheckpoints
from rlearn.logging import MessageHub, get_logger
from rlearn.monitor import IrregularKey, LogProcessor, LogProcessorConfigError, Metrics, TickMonitor
from rlearn.monitor.metrics import HOOK_OWNER
from rlearn.registry import defined_at
from rlearn.trace import span
from rlearn.writers import Writer, build_writers
from rlearn.writers.base import ScalarValue

__all__ = ["BaseLearner", "LearnerConfigError"]

_hub_ids = itertools.count()


class LearnerConfigError(ConfigError):
    """A learner config key is unknown or has a bad value; the message names it (``learner.log_freq``)."""


class BaseLearner(LearnerCheckpoints, HookManager):
    """Runs train iterations of a policy, monitors their metrics and saves/loads checkpoints.

    Args:
        policy: a :class:`policies.Policy` (anything with ``_forward_learn``, ``monitor_vars``,
            ``optimizers``, ``state_dict`` and ``load_state_dict``).
        cfg: the ``learner`` config section, possibly partial (keys and defaults:
            :class:`rlearn.config.sections.LearnerSection`, docs/configuration.md); an unknown key or a bad
            value is a :class:`LearnerConfigError` naming ``learner.<key>``.
        work_dir: where ``tb/`` (TensorBoard) and ``ckpt/`` (checkpoints) go; None keeps nothing on disk.
        logger: where tables and warnings go (default: ``rlearn.logging.get_logger()``).
        rank, world_size: this process's place in a distributed run; only rank 0 writes (by default).
        writers: where the metric path ends (docs/writers.md). None: on rank 0 the writers the ``writers``
            config key names (default: a table into ``logger``; with a ``work_dir`` also TensorBoard and
            ``metrics.jsonl``), none on other ranks. A list is used as given, on every rank.

    Attributes:
        train_iter: completed train iterations.
        envstep: env steps collected so far (global across ranks), as passed to :meth:`train`.
        metrics: the run's :class:`~rlearn.monitor.Metrics` (declared keys, recording, statistics, writers);
            ``monitor`` (its :class:`~rlearn.monitor.TickMonitor`, one tick per iteration), ``statistics`` (its
            :class:`~rlearn.logging.LogProcessor`, ``learner.log_processor.custom_cfg``) and ``writers`` (the
            list of :class:`~rlearn.writers.Writer` every shown number goes to) are its parts.
        message_hub: a :class:`~rlearn.logging.MessageHub` whose ``update_scalar`` records into :attr:`monitor`;
            runtime info: ``train_iter``, ``envstep``, ``lr``, ``rank``, ``world_size``, ``work_dir``, ``policy``.
        run_config: optional full run config (set by the pipeline); saved in checkpoints when not None.
    """

    def __init__(
        self,
        policy: Any,
        cfg: Optional[Mapping[str, Any]] = None,
        work_dir: Union[str, Path, None] = None,
        logger: Optional[logging.Logger] = None,
        rank: int = 0,
        world_size: int = 1,
        writers: Optional[Sequence[Writer]] = None,
    ) -> None:
        super().__init__()
        self.policy = policy
        try:
            self.cfg = resolve_section("learner", cfg)  # defaults filled in, every value checked
        except ConfigError as exc:
            raise LearnerConfigError(str(exc)) from exc
        self.work_dir: Optional[Path] = Path(work_dir) if work_dir is not None else None
        self.logger = logger if logger is not None else get_logger()
        if not (is_int(rank) and is_int(world_size)):
            raise TypeError(f"rank and world_size must be ints, got rank={rank!r}, world_size={world_size!r}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        self.rank = rank
        self.world_size = world_size
        self.run_config: Optional[Mapping[str, Any]] = None

        self.train_iter = 0
        self.envstep = 0
        monitor = TickMonitor(window_size=self.cfg["monitor_window"], window_sizes=self.cfg["monitor_windows"])
        if writers is None:  # the writers ``learner.writers`` names, on rank 0 only
            writers = build_writers(self.cfg["writers"], self.work_dir, self.logger) if rank == 0 else []
        try:
            statistics = LogProcessor(custom_cfg=self.cfg["log_processor"].get("custom_cfg") or [])
            self.metrics = Metrics(monitor, statistics, writers, self.logger, self.cfg["strict"], rank)
            name = type(policy).__name__
            collect = getattr(policy, "monitor_vars_collect", None)
            collect_keys = [IrregularKey(f"collector/{k}") if isinstance(k, IrregularKey) else f"collector/{k}"
                            for k in (collect() if callable(collect) else ())]
            learn_keys = [key for key in policy.monitor_vars() if key not in set(collect_keys)]
            self.metrics.declare(learn_keys, f"{name}._monitor_vars_learn()")
            self.metrics.declare(collect_keys, f"{name}._monitor_vars_collect()")
            self._lr_keys: Dict[str, str] = self._learner_lr_keys()
            self.metrics.declare(list(self._lr_keys.values()), "the learner")
        except LogProcessorConfigError as exc:
            raise LearnerConfigError(f"learner.log_processor.{exc}") from exc
        self._learn_owner = f"{name}._monitor_vars_learn()"
        self._states: Dict[str, Any] = {}
        self._tick_pending = False
        self._windows_checked = False

        # the current hub: MessageHub.get_current_instance().update_scalar(...) from anywhere records here
        self.message_hub = MessageHub.get_instance(f"rlearn.learner.{next(_hub_ids)}")
        self.message_hub.attach(monitor, self.record, live_info={
            "train_iter": (lambda: self.train_iter, True), "envstep": (lambda: self.envstep, True),
            "lr": (self._current_lrs, False)})
        self._publish_info()

        if self.cfg["hooks"]:
            for index, hook_cfg in enumerate(self.cfg["hooks"]):
                if not isinstance(hook_cfg, Mapping):
                    raise LearnerConfigError(f"learner config 'hooks[{index}]' must be a dict, got {hook_cfg!r}")
                hook, priority = build_hook(dict(hook_cfg))
                self.register_hook(hook, priority)

    # ------------------------------------------------------------------------------------------ config
    def check_monitor_windows(self) -> None:
        """Check once that every ``monitor_windows`` key is a declared monitor key (a misspelt key's window
        would never be used): a warning per key, or with ``strict=True`` a :class:`LearnerConfigError`
        naming them. Called at the first iteration, or earlier by ``rlearn.run`` once hooks have declared
        their keys."""
        if self._windows_checked:
            return
        owner = type(self.policy).__name__
        messages = undeclared_window_warnings(self.cfg["monitor_windows"], self.monitor_vars(), owner)
        if messages and self.cfg["strict"]:
            raise LearnerConfigError("; ".join(messages) + " (learner.strict=True makes this an error)")
        self._windows_checked = True
        for message in messages:
            self.logger.warning(message)

    # ---------------------------------------------------------------------------------------- train
    def _publish_info(self) -> None:
        """Runtime info of this process (also re-published after a checkpoint replaced the hub's)."""
        work_dir = None if self.work_dir is None else str(self.work_dir)
        self.message_hub.update_info_dict({"rank": self.rank, "world_size": self.world_size, "work_dir": work_dir,
                                           "policy": type(self.policy).__name__})

    def _current_lrs(self) -> Dict[str, float]:
        """``{optimizer name: lr of its first param group}``: the current (scheduled, warmed-up) rates."""
        return {name: opt.param_groups[0]["lr"] for name, opt in self.policy.optimizers().items()}

    def train(self, data: Any, envstep: Optional[int] = None) -> Dict[str, Any]:
        """One train iteration on ``data``; ``envstep`` is the env steps collected so far (None: unchanged).

        Returns the policy's info dict. If ``_forward_learn`` or recording raises, the iteration is
        not counted. After-iter hooks see this iteration's values in the window; the tick comes last.
        """
        if envstep is not None:
            if not is_int(envstep):
                raise TypeError(f"envstep must be an int, got {envstep!r}")
            if envstep < self.envstep:
                raise ValueError(f"envstep went backwards: {int(envstep)} < {self.envstep} (the learner's env-step "
                                 "axis must not decrease; pass the collector's total env steps)")
            self.envstep = int(envstep)
        self.call_hook("before_iter")
        if not self._windows_checked:  # hooks have declared their keys by now
            self.check_monitor_windows()
        # ``iter``: the 1-based number of this iteration, which ``rlearn trace --from-iter/--to-iter`` filters on
        with span("learner/iteration", lane="learner", iter=self.train_iter + 1):
            info = self.policy._forward_learn(data)
        if not isinstance(info, dict) and not isinstance(info, Mapping):  # the dict test first: it is cheaper
            raise TypeError(
                f"{type(self.policy).__name__}._forward_learn must return a dict of scalars, got {type(info).__name__}"
            )
        self._record_lrs()
        try:
            self.metrics.record(info, self._learn_owner)
        except (TypeError, ValueError) as exc:  # a value that is not a scalar: name the method that returned it
            method = getattr(type(self.policy), "_forward_learn", None)
            raise type(exc)(f"{type(self.policy).__name__}._forward_learn ({defined_at(method)}) returned a bad "
                            f"key or value: {exc}") from exc
        self.train_iter += 1
        self._tick_pending = True
        try:
            self.call_hook("after_iter")
        finally:
            self.monitor.tick()
            self._tick_pending = False
        return dict(info)

    def _record_lrs(self) -> None:
        """Record the learner's ``cur_lr`` keys: the current learning rate of every optimizer, as scheduled
        and warmed up for this iteration."""
        if self._lr_keys:
            optimizers = self.policy.optimizers()
            lr_info = {key: optimizers[name].param_groups[0]["lr"]
                       for name, key in self._lr_keys.items() if name in optimizers}
            if lr_info:
                self.monitor.update(lr_info)

    def _learner_lr_keys(self) -> Dict[str, str]:
        """optimizer name -> the learner's own lr key (empty if the policy reports its own cur_lr*)."""
        if any(key.startswith("cur_lr") for key in self.metrics.keys()):
            return {}
        names = list(self.policy.optimizers())
        return {names[0]: "cur_lr"} if len(names) == 1 else {name: f"cur_lr_{name}" for name in names}

    # ------------------------------------------------------------------------- the metric path (self.metrics)
    @property
    def monitor(self) -> TickMonitor:
        """The run's store (``metrics.monitor``)."""
        return self.metrics.monitor

    @property
    def statistics(self) -> LogProcessor:
        """Which statistics each key shows (``metrics.statistics``)."""
        return self.metrics.statistics

    @property
    def writers(self) -> List[Writer]:
        return self.metrics.writers.writers

    @property
    def failed_writers(self) -> Dict[str, str]:
        """Writers disabled after an error: name -> the error."""
        return self.metrics.writers.failed

    def monitor_vars(self) -> List[str]:
        """Declared monitor keys in declaration order: the policy's (learn keys, then its collect keys as
        ``collector/<key>``), the learner's ``cur_lr`` keys, then those of :meth:`declare_monitor_vars`."""
        return self.metrics.keys()

    def monitor_var_owner(self, key: str) -> str:
        """Where ``key`` is declared, for messages (``<Policy>._monitor_vars_learn()``, ``the learner``...)."""
        return self.metrics.owner(key)

    def irregular_keys(self) -> Set[str]:
        """The declared keys reported only when something happens (:func:`rlearn.monitor.irregular`)."""
        return self.metrics.irregular_keys()

    def declare_monitor_vars(self, keys: Iterable[str], irregular: bool = False) -> None:
        """Declare keys recorded by hooks or the pipeline (``data_time``, ``collector/episode_return``...);
        ``irregular=True``: reported only when something happens. A bad key raises ``TypeError``/``ValueError``,
        a key whose default name a ``custom_cfg`` entry takes :class:`LearnerConfigError`."""
        try:
            self.metrics.declare(keys, HOOK_OWNER, irregular)
        except LogProcessorConfigError as exc:
            raise LearnerConfigError(f"learner.log_processor.{exc}") from exc

    def record(self, info: Mapping[str, Any]) -> None:
        """Record ``info`` (keys of hooks or the pipeline) at the current tick (:meth:`Metrics.record`)."""
        self.metrics.record(info)

    def record_collect(self, metrics: Mapping[str, Any]) -> None:
        """Record the policy's collect-side metrics (``CollectResult.metrics``: a scalar or the list of values
        of one collect call per key) at the current tick, as ``collector/<key>``; all-or-nothing."""
        if not isinstance(metrics, Mapping):
            raise TypeError(f"learner.record_collect expects a dict key -> values, got {type(metrics).__name__}")
        self.metrics.record({f"collector/{key}": list(v) if isinstance(v, (list, tuple)) else [v] for key, v in metrics.items()},
                            f"{type(self.policy).__name__}._monitor_vars_collect()", columns=True)

    def last_tick(self) -> int:
        """The monitor tick of the last completed iteration: the current tick inside ``after_iter`` hooks, the one
        before it once :meth:`train` has returned; the final log of a run ends its windows there."""
        return self.monitor.tick_count if self._tick_pending else self.monitor.tick_count - 1

    def metric_keys(self, keys: Union[None, str, Sequence[str]] = None) -> List[str]:
        return self.metrics.metric_keys(keys)

    def log_metrics(self, keys: Union[None, str, Sequence[str]] = None, end: Optional[int] = None,
                    extra: Optional[Mapping[str, ScalarValue]] = None) -> Dict[str, ScalarValue]:
        """Write ``extra`` and the statistics of ``keys`` at (``train_iter``, ``envstep``) (:meth:`Metrics.log`)."""
        return self.metrics.log(self.train_iter, self.envstep, keys, end, extra)

    def write_scalars(self, scalars: Mapping[str, ScalarValue], step_iter: Optional[int] = None,
                      step_env: Optional[int] = None) -> None:
        """Hand ``scalars`` (final names) to every writer at (``step_iter``, ``step_env``), default now."""
        self.metrics.writers.write_scalars(scalars, self.train_iter if step_iter is None else step_iter,
                                           self.envstep if step_env is None else step_env)

    def write_text(self, tag: str, text: str, step_iter: Optional[int] = None) -> None:
        self.metrics.writers.write_text(tag, text, self._at(step_iter))

    def write_video(self, name: str, frames: Sequence[Any], fps: float, step_iter: Optional[int] = None,
                    step_env: Optional[int] = None) -> None:
        """A recorded episode (H x W x 3 uint8 ``frames`` at ``fps``) under ``name`` to every writer."""
        self.metrics.writers.write_video(name, frames, fps, self._at(step_iter), self.envstep if step_env is None else step_env)

    def write_config(self, config: Optional[Mapping[str, Any]] = None, step_iter: Optional[int] = None) -> None:
        """The run's resolved config (default :attr:`run_config`) to every writer, when a run starts or resumes."""
        config = self.run_config if config is None else config
        if config is not None:
            self.metrics.writers.write_config(config, self._at(step_iter))

    def write_hparams(self, metrics: Mapping[str, float], hparams: Optional[Mapping[str, Any]] = None) -> None:
        """The hyper-parameters (default: :attr:`run_config` flattened) and final ``metrics`` to every writer."""
        if hparams is None and self.run_config is not None:
            from rlearn.config import flatten

            hparams = flatten(self.run_config)
        if hparams is not None:
            self.metrics.writers.write_hparams(hparams, dict(metrics), self.train_iter)

    def close(self) -> None:
        """Close every writer (a later write opens new files)."""
        self.metrics.writers.close()

    def _at(self, step_iter: Optional[int]) -> int:
        return self.train_iter if step_iter is None else step_iter
