"""``BaseLearner``: one ``train(data, envstep)`` call is one train iteration of a policy.

The learner owns the counters (``train_iter``, ``envstep``), the :class:`~rlearn.monitor.TickMonitor`
that windows the metrics, the metric path's end (statistics -> ``writers``: table, TensorBoard...), the
hooks and the checkpoints. One iteration::

    envstep updated -> before_iter hooks -> policy._forward_learn(data) -> record cur_lr, then the info
    -> train_iter += 1 -> after_iter hooks (timer, LR scheduler, LogShowHook, CheckpointHook) -> tick
"""

from __future__ import annotations

import copy
import itertools
import logging
import numbers
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from rlearn import __version__
from rlearn.hooks.base import HookManager, build_hook
from rlearn.checkpoint import files as ckpt
from rlearn.config import ConfigError, resolve_section, undeclared_window_warnings
from rlearn.learner.metric_path import MetricPath
from rlearn.logging import LogProcessor, MessageHub, get_logger
from rlearn.monitor import TickMonitor
from rlearn.trace import get_tracer, span
from rlearn.writers import TensorBoardWriter, Writer

__all__ = ["BaseLearner", "LearnerConfigError"]

_hub_ids = itertools.count()


class LearnerConfigError(ConfigError):
    """A learner config key is unknown or has a bad value; the message names it (``learner.log_freq``)."""


class BaseLearner(MetricPath, HookManager):
    """Runs train iterations of a policy, monitors their metrics and saves/loads checkpoints.

    Args:
        policy: a :class:`policies.Policy` (anything with ``_forward_learn``, ``monitor_vars``,
            ``optimizers``, ``state_dict`` and ``load_state_dict``).
        cfg: the ``learner`` config section, possibly partial: keys, defaults and ranges are declared once in
            :class:`rlearn.config.sections.LearnerSection` (docs/configuration.md): ``log_freq``,
            ``monitor_window`` (None: ``log_freq``), ``monitor_windows`` (per-key windows; a key that no
            declared monitor key uses is warned about at the first iteration), ``strict``, ``hooks``,
            ``log_processor``. An unknown key or a bad value is a :class:`LearnerConfigError` (a
            :class:`rlearn.config.ConfigError`) naming ``learner.<key>``.
        work_dir: where ``tb/`` (TensorBoard) and ``ckpt/`` (checkpoints) go; None keeps nothing on disk.
        logger: where tables and warnings go (default: ``rlearn.logging.get_logger()``).
        rank, world_size: this process's place in a distributed run; only rank 0 writes (by default).
        writers: where the metric path ends (see docs/writers.md). None: on rank 0 the writers the
            ``writers`` config key names (default: a :class:`~rlearn.writers.TableWriter` into ``logger`` and,
            with a ``work_dir``, a :class:`~rlearn.writers.TensorBoardWriter` into ``<work_dir>/tb`` and a
            :class:`~rlearn.writers.JsonlWriter` into ``<work_dir>/metrics.jsonl``); no writer on other
            ranks. A list is used as given, on every rank.

    Attributes:
        train_iter: completed train iterations.
        envstep: env steps collected so far (global across ranks), as passed to :meth:`train`.
        monitor: the :class:`~rlearn.monitor.TickMonitor` (one tick per iteration).
        statistics: the statistics step, a :class:`~rlearn.logging.LogProcessor` configured by
            ``learner.log_processor.custom_cfg`` (``<key>_avg`` for every key by default).
        writers: the list of :class:`~rlearn.writers.Writer` every shown number goes to.
        message_hub: a :class:`~rlearn.logging.MessageHub` holding ``train_iter``, ``envstep``, ``rank``,
            ``world_size``, ``work_dir`` and ``policy`` as runtime info.
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
        self.cfg = self._check_config(cfg)
        self.work_dir: Optional[Path] = Path(work_dir) if work_dir is not None else None
        self.logger = logger if logger is not None else get_logger()
        if isinstance(rank, bool) or not isinstance(rank, int) or isinstance(world_size, bool) or not isinstance(world_size, int):
            raise TypeError(f"rank and world_size must be ints, got rank={rank!r}, world_size={world_size!r}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        self.rank = rank
        self.world_size = world_size
        self.run_config: Optional[Mapping[str, Any]] = None

        self.train_iter = 0
        self.envstep = 0
        self.monitor = TickMonitor(window_size=self.cfg["monitor_window"], window_sizes=self.cfg["monitor_windows"])

        try:
            self.statistics = LogProcessor(self.cfg["log_processor"].get("custom_cfg") or [])
        except ValueError as exc:
            raise LearnerConfigError(f"learner.log_processor.{exc}") from exc
        self.statistics.prepare(self.monitor)  # last_n rings and since-start sums fill from the first value
        self.writers: List[Writer] = list(writers) if writers is not None else self._default_writers()
        #: writers disabled after an error: name -> the error (see MetricPath._call_writers)
        self.failed_writers: Dict[str, str] = {}
        for writer in self.writers:
            if not isinstance(writer, Writer):
                raise TypeError(f"learner writers must be rlearn.writers.Writer instances, got {type(writer).__name__}")

        self._policy_vars: List[str] = list(policy.monitor_vars())
        collect = getattr(policy, "monitor_vars_collect", None)
        self._collect_vars = {f"collector/{key}" for key in (collect() if callable(collect) else ())}
        self._lr_keys: Dict[str, str] = self._learner_lr_keys()
        self._extra_vars: List[str] = []
        self._declared = set(self._policy_vars) | set(self._lr_keys.values())
        self._warned_undeclared: set = set()
        self._reported_anywhere: set = set()  # declared keys some rank has reported (multi-process runs)
        self._states: Dict[str, Any] = {}
        self._tick_pending = False
        self._windows_checked = False

        self.message_hub = MessageHub.get_instance(f"rlearn.learner.{next(_hub_ids)}")
        self._publish_info()

        if self.cfg["hooks"]:
            for index, hook_cfg in enumerate(self.cfg["hooks"]):
                if not isinstance(hook_cfg, Mapping):
                    raise LearnerConfigError(f"learner config 'hooks[{index}]' must be a dict, got {hook_cfg!r}")
                hook, priority = build_hook(dict(hook_cfg))
                self.register_hook(hook, priority)

    # ------------------------------------------------------------------------------------------ config
    @classmethod
    def _check_config(cls, cfg: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
        """The learner section resolved by the config schema: defaults filled in, ``monitor_window`` set to
        ``log_freq`` when None, every value checked (:func:`rlearn.config.resolve_section`)."""
        try:
            return resolve_section("learner", cfg)
        except ConfigError as exc:
            raise LearnerConfigError(str(exc)) from exc

    def _warn_unused_windows(self) -> None:
        """Warn once about ``monitor_windows`` keys that no declared monitor key uses (called at the first
        iteration, when the policy, the hooks and the run have declared their keys)."""
        self._windows_checked = True
        owner = type(self.policy).__name__
        for message in undeclared_window_warnings(self.cfg["monitor_windows"], self.monitor_vars(), owner):
            self.logger.warning(message)

    # ---------------------------------------------------------------------------------------- train
    def _set_envstep(self, envstep: Any) -> None:
        if isinstance(envstep, bool) or not isinstance(envstep, numbers.Integral):
            raise TypeError(f"envstep must be an int, got {envstep!r}")
        if envstep < self.envstep:
            raise ValueError(
                f"envstep went backwards: {int(envstep)} < {self.envstep} (the learner's env-step axis must "
                "not decrease; pass the collector's total env steps)"
            )
        self.envstep = int(envstep)

    def _publish_counters(self) -> None:
        self.message_hub.update_info("train_iter", self.train_iter)
        self.message_hub.update_info("envstep", self.envstep)

    def _publish_info(self) -> None:
        """Runtime info of this process (also re-published after a checkpoint replaced the hub's)."""
        self.message_hub.update_info("rank", self.rank)
        self.message_hub.update_info("world_size", self.world_size)
        self.message_hub.update_info("work_dir", None if self.work_dir is None else str(self.work_dir))
        self.message_hub.update_info("policy", type(self.policy).__name__)
        self._publish_counters()

    def train(self, data: Any, envstep: Optional[int] = None) -> Dict[str, Any]:
        """One train iteration on ``data``; ``envstep`` is the env steps collected so far (None: unchanged).

        Returns the policy's info dict. If ``_forward_learn`` or recording raises, the iteration is
        not counted. After-iter hooks see this iteration's values in the window; the tick comes last.
        """
        if envstep is not None:
            if type(envstep) is int and envstep >= self.envstep:  # the common case, checked by _set_envstep otherwise
                self.envstep = envstep
            else:
                self._set_envstep(envstep)
        self._publish_counters()
        self.call_hook("before_iter")
        if not self._windows_checked:  # hooks have declared their keys by now
            self._warn_unused_windows()
        if get_tracer() is None:
            info = self.policy._forward_learn(data)
        else:
            # ``iter`` is the 1-based number this iteration will have (TensorBoard step, iteration_<n>.pt),
            # which ``rlearn trace --from-iter/--to-iter`` filters on.
            with span("learner/iteration", lane="learner", iter=self.train_iter + 1):
                info = self.policy._forward_learn(data)
        if not isinstance(info, dict) and not isinstance(info, Mapping):  # the dict test first: it is cheaper
            raise TypeError(
                f"{type(self.policy).__name__}._forward_learn must return a dict of scalars, got {type(info).__name__}"
            )
        self._record_lrs()
        if type(info) is dict and info.keys() <= self._declared:  # _record's fast path, without its owner string
            self.monitor.update(info)
        else:
            self._record(info, f"{type(self.policy).__name__}._monitor_vars_learn()")
        self.train_iter += 1
        self._publish_counters()
        self._tick_pending = True
        try:
            self.call_hook("after_iter")
        finally:
            self.monitor.tick()
            self._tick_pending = False
        return dict(info)

    def _record_lrs(self) -> None:
        """Record the learner's ``cur_lr`` keys and publish ``lr``: the current learning rate of every
        optimizer (``{name: lr of its first param group}``), as scheduled and warmed up for this iteration,
        for hooks that read runtime state from the hub; one ``optimizers()`` call for both."""
        optimizers = self.policy.optimizers()
        if self._lr_keys:
            lr_info = {key: optimizers[name].param_groups[0]["lr"]
                       for name, key in self._lr_keys.items() if name in optimizers}
            if lr_info:
                self.monitor.update(lr_info)
        self.message_hub.update_info(
            "lr", {name: opt.param_groups[0]["lr"] for name, opt in optimizers.items()}, resumed=False
        )

    # ------------------------------------------------------------------------------------- checkpoints
    # (monitor keys, record, log_metrics, writers: rlearn/learner/metric_path.py)
    def register_state(self, name: str, obj: Any) -> None:
        """Save ``obj.state_dict()`` in every checkpoint under ``name`` and restore it on load."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"state name must be a non-empty str, got {name!r}")
        if not (callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))):
            raise TypeError(f"register_state({name!r}): {type(obj).__name__} has no state_dict/load_state_dict")
        if name in self._states:
            raise ValueError(f"a state called {name!r} is already registered")
        self._states[name] = obj

    def _stateful_hooks(self) -> Dict[str, Any]:
        hooks: Dict[str, Any] = {}
        for hook in self.hooks:
            if callable(getattr(hook, "state_dict", None)) and callable(getattr(hook, "load_state_dict", None)):
                name = type(hook).__name__
                suffix = 2
                while name in hooks:
                    name = f"{type(hook).__name__}.{suffix}"
                    suffix += 1
                hooks[name] = hook
        return hooks

    def checkpoint_dict(self) -> Dict[str, Any]:
        """Everything a resumed run needs, as saved by :meth:`save_checkpoint` (see docs/checkpoints.md)."""
        checkpoint: Dict[str, Any] = {
            "format": ckpt.FORMAT_TAG,
            "format_version": ckpt.FORMAT_VERSION,
            "rlearn_version": __version__,
            "policy_class": type(self.policy).__qualname__,
            "policy_module": type(self.policy).__module__,
            "train_iter": self.train_iter,
            "envstep": self.envstep,
            "saved_at": time.time(),
            "learner": {
                "monitor": self.monitor.state_dict(),
                "tick_pending": self._tick_pending,
                "message_hub": self.message_hub.state_dict(),
                "warned_undeclared": sorted(self._warned_undeclared),
                "extra_monitor_vars": list(self._extra_vars),
                "writers": {
                    name: state
                    for name, writer in self._stateful_writers().items()
                    if (state := writer.state_dict()) is not None
                },
            },
            "policy": self.policy.state_dict(),
            "hooks": {name: hook.state_dict() for name, hook in self._stateful_hooks().items()},
            "states": {name: obj.state_dict() for name, obj in self._states.items()},
            "rng": ckpt.capture_rng_state(),
            "config": copy.deepcopy(dict(self.run_config)) if self.run_config is not None else None,
        }
        return checkpoint

    def save_checkpoint(self, path: Union[str, Path, None] = None, copies: Sequence[Union[str, Path]] = ()) -> Path:
        """Save a checkpoint atomically to ``path`` (default ``<work_dir>/ckpt/iteration_<train_iter>.pt``)
        and to each path in ``copies`` (e.g. ``latest.pt``); returns ``path``.

        Every writer is flushed first, so every point the checkpoint counts is on disk. Hooks get
        ``before_save_checkpoint(learner, checkpoint)`` and may add entries. A state that cannot be
        stored raises :class:`~rlearn.checkpoint.CheckpointError` before any file is touched.
        """
        if path is None:
            if self.work_dir is None:
                raise ValueError("save_checkpoint() needs a path when the learner has no work_dir")
            path = self.work_dir / "ckpt" / f"iteration_{self.train_iter}.pt"
        path = Path(path)
        self._call_writers("flush")
        checkpoint = self.checkpoint_dict()
        self.call_hook("before_save_checkpoint", checkpoint)
        data = ckpt.serialize_checkpoint(checkpoint)
        ckpt.atomic_write_bytes(path, data)
        for copy_path in copies:
            ckpt.atomic_write_bytes(copy_path, data)
        return path

    def load_checkpoint(self, path: Union[str, Path], rewind_tensorboard: bool = True) -> Dict[str, Any]:
        """Restore a checkpoint written by :meth:`save_checkpoint` and return its content.

        Restores counters, monitor windows (completing the tick of a checkpoint taken inside an
        iteration), message hub, policy (networks, optimizers, extra state), stateful hooks, registered
        states, RNG states and the writers' states. With ``rewind_tensorboard`` every writer is rewound
        to the checkpoint (:meth:`~rlearn.writers.Writer.rewind`): the TensorBoard event files lose
        every point written after it, so the resumed run's curves have no duplicate and no missing point.

        Every problem (missing file, not a checkpoint, truncated, another policy class, mismatched
        network shapes, a registered state missing) raises
        :class:`~rlearn.checkpoint.CheckpointError` naming the file, before anything is changed.
        """
        path = Path(path)
        checkpoint = ckpt.read_checkpoint(path)
        self._check_compatible(path, checkpoint)
        saved_hooks = checkpoint["hooks"]
        hooks = self._stateful_hooks()
        for name in sorted(set(saved_hooks) - set(hooks)):
            self.logger.warning("checkpoint %s has state for hook %s, which is not registered; ignored", path, name)
        for name in sorted(set(hooks) - set(saved_hooks)):
            self.logger.warning("checkpoint %s has no state for hook %s; it starts fresh", path, name)

        def apply(section: str, action) -> None:
            try:
                action()
            except Exception as exc:
                raise ckpt.CheckpointError(
                    f"checkpoint {path}: cannot restore {section} ({type(exc).__name__}: {exc})"
                ) from exc

        learner_state = checkpoint["learner"]
        apply("the policy", lambda: self.policy.load_state_dict(checkpoint["policy"]))
        apply("the monitor", lambda: self.monitor.load_state_dict(learner_state["monitor"]))
        configured = {key: self.cfg["monitor_windows"].get(key, self.cfg["monitor_window"]) for key in self.monitor_vars()}
        restored = {key: self.monitor.window_size(key) for key in configured}
        if configured != restored:
            changed = ", ".join(f"{k}: {restored[k]} (config {configured[k]})" for k in configured if configured[k] != restored[k])
            self.logger.warning(
                "checkpoint %s: monitor windows differ from the config; the checkpoint's are kept so the windows "
                "continue: %s",
                path,
                changed,
            )
        if learner_state.get("tick_pending"):
            self.monitor.tick()  # the checkpoint was taken in after_iter, before the iteration's tick
        if "message_hub" in learner_state:
            apply("the message hub", lambda: self.message_hub.load_state_dict(learner_state["message_hub"]))
        for name, hook in hooks.items():
            if name in saved_hooks:
                apply(f"hook {name}", lambda h=hook, n=name: h.load_state_dict(saved_hooks[n]))
        for name, obj in self._states.items():
            apply(f"state {name!r}", lambda o=obj, n=name: o.load_state_dict(checkpoint["states"][n]))
        apply("the RNG states", lambda: ckpt.restore_rng_state(checkpoint["rng"]))
        self.train_iter = int(checkpoint["train_iter"])
        self.envstep = int(checkpoint["envstep"])
        self._warned_undeclared = set(learner_state.get("warned_undeclared", ()))
        self.declare_monitor_vars(learner_state.get("extra_monitor_vars", ()))
        writer_states = dict(learner_state.get("writers", {}))
        if "tb_points" in learner_state:  # checkpoints written before writers existed
            writer_states.setdefault(TensorBoardWriter.__name__, {"points": learner_state["tb_points"]})
        for name, writer in self._stateful_writers().items():
            if name in writer_states:
                apply(f"writer {name}", lambda w=writer, n=name: w.load_state_dict(writer_states[n]))
        self._publish_info()
        if rewind_tensorboard:
            self._call_writers("rewind", self.train_iter, self.envstep)
        self.call_hook("after_load_checkpoint", checkpoint)
        self.logger.info(
            "resumed from %s: train_iter=%d envstep=%d", path, self.train_iter, self.envstep
        )
        return checkpoint

    def _check_compatible(self, path: Path, checkpoint: Mapping[str, Any]) -> None:
        """Policy class, network shapes and registered states must match; raises CheckpointError."""
        saved_class = checkpoint["policy_class"]
        current_class = type(self.policy).__qualname__
        if saved_class != current_class:
            raise ckpt.CheckpointError(
                f"checkpoint {path}: written by policy {saved_class}, but this learner runs {current_class}"
            )
        saved_modules = checkpoint["policy"].get("modules", {}) if isinstance(checkpoint["policy"], Mapping) else {}
        current_modules = {name: module.state_dict() for name, module in self.policy.modules().items()}
        problems: List[str] = []
        for name in sorted(set(current_modules) | set(saved_modules)):
            if name not in saved_modules:
                problems.append(f"network {name!r} missing from the checkpoint")
                continue
            if name not in current_modules:
                problems.append(f"unexpected network {name!r} in the checkpoint")
                continue
            saved, current = saved_modules[name], current_modules[name]
            for param in sorted(set(saved) | set(current)):
                if param not in saved:
                    problems.append(f"{name}.{param} missing from the checkpoint")
                elif param not in current:
                    problems.append(f"unexpected {name}.{param} in the checkpoint")
                elif hasattr(saved[param], "shape") and tuple(saved[param].shape) != tuple(current[param].shape):
                    problems.append(
                        f"{name}.{param} has shape {tuple(saved[param].shape)} in the checkpoint, "
                        f"{tuple(current[param].shape)} in the policy"
                    )
        if problems:
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            raise ckpt.CheckpointError(f"checkpoint {path} does not fit policy {current_class}: {shown}")
        missing_states = sorted(set(self._states) - set(checkpoint["states"]))
        if missing_states:
            raise ckpt.CheckpointError(
                f"checkpoint {path}: no state for registered object(s) {', '.join(map(repr, missing_states))}"
            )
        for name in sorted(set(checkpoint["states"]) - set(self._states)):
            self.logger.warning("checkpoint %s has state %r, which is not registered; ignored", path, name)
