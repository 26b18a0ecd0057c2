"""``Trainer`` (build, then run) and ``train`` (both at once): one run from one config, in one process or
as one rank of several. An error that ends the run is the last line of its log (:mod:`~rlearn.run.failure`).
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from rlearn import distributed as dist
from rlearn.checkpoint import CheckpointError
from rlearn.config import ConfigError, dump_config, flatten, load_config, resolve_config
from rlearn.logging.logger import rank_log_file
from rlearn.run import build
from rlearn.run.loop import OnPolicyLoop
from rlearn.run.off_policy import OffPolicyLoop, UpdateSchedule
from rlearn.run.failure import failure_line
from rlearn.run.ranks import (
    RANK_SEED_STRIDE, check_ranks_agree, check_same_config, check_seed, derived_seed, rederive_rank_streams,
    seed_everything,
)
from rlearn.run.result import INTERRUPTED, MAX_ENV_STEPS, STOP_VALUE, RunResult, summary_lines
from rlearn.run.resume_check import CompleteRun, inspect_resume
from rlearn.run.signals import InterruptGuard, StopNow, TerminatedByLauncher, stop_with_parent
from rlearn.run.state import STATE_NAME, RunState
from rlearn.fileio import FileWriteError, check_writable, clean_stale_temp_files
from rlearn.run.workdir import ResumeArg, choose_work_dir, resume_checkpoint

__all__ = ["Trainer", "train"]


class Trainer:
    """Builds every part of a run from a config (arguments as in :func:`train`); :meth:`run` trains (once).
    Until then the parts can be looked at or replaced: ``env``, ``eval_env``, ``policy``, ``collector``,
    ``evaluator``, ``buffer`` (None on-policy), ``learner``, ``eval_hook``, ``loop``, ``logger``."""

    def __init__(self, cfg: Union[str, Path, Mapping[str, Any]], work_dir: Union[str, Path, None] = None,
                 resume: ResumeArg = None, progress: Optional[bool] = None) -> None:
        self.cfg: Dict[str, Any] = resolve_config(cfg) if isinstance(cfg, Mapping) else load_config(cfg)
        self.exp_name: str = self.cfg["exp_name"]
        self.distributed = False
        self._owns_process_group = False
        self.rank, self.world_size = 0, dist.get_world_size()  # the launcher's WORLD_SIZE before joining
        self.env: Any = None
        self.eval_env: Any = None
        self.tracer: Any = None
        self.logger: Any = None
        self.loop: Any = None
        self.learner: Any = None
        self._closed = False
        # start-up handles the signals as training does: one process notes the first one, a rank stops at once
        startup = TerminatedByLauncher(True) if self.world_size > 1 else InterruptGuard(True)
        try:
            with startup:
                self._start_up(work_dir, resume, progress)
        except BaseException as exc:
            self._log_fatal(exc)
            self.close()
            raise
        #: a signal received during start-up (one process): :meth:`run` stops at its first safe point, with a checkpoint
        self._startup_signal: Optional[int] = getattr(startup, "signum", None)

    def _start_up(self, work_dir: Union[str, Path, None], resume: ResumeArg, progress: Optional[bool]) -> None:
        """Join the process group (before touching the disk), check the config across ranks, choose the work dir
        and the checkpoint, build every part."""
        if self.world_size > 1:
            stop_with_parent()  # a rank whose launcher dies (even SIGKILLed) gets SIGTERM: no unsupervised ranks
        joined_before = dist.is_distributed()
        self.distributed = dist.init_distributed(self.cfg["dist"]["backend"], timeout_s=self.cfg["dist"]["timeout_s"])
        self._owns_process_group = self.distributed and not joined_before
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.rank_seed = self.cfg["seed"] + RANK_SEED_STRIDE * self.rank
        check_seed(self.cfg["seed"], self.world_size)
        check_same_config(self.cfg)  # collective, before any rank touches the disk
        self.dirs = choose_work_dir(self.cfg, work_dir, resume, self.rank, broadcast=dist.broadcast_object)
        self.work_dir = self.dirs.path
        #: this rank's text log: ``<exp_name>.log`` on rank 0, ``<exp_name>_rank<r>.log`` on rank r
        self.log_file = rank_log_file(self.work_dir / f"{self.exp_name}.log", self.rank)
        self.resume_path = resume_checkpoint(self.dirs, resume)
        #: set when the checkpoint's run has nothing left to do: :meth:`run` says so and changes nothing
        self.complete: Optional[CompleteRun] = (
            None if self.resume_path is None else inspect_resume(self.resume_path, self.cfg, self.world_size))
        self.progress_requested = progress
        if self.complete is None:
            self._build()

    def _build(self) -> None:
        import torch

        from rlearn.collect import Collector, Evaluator
        from rlearn.logging import get_logger

        cfg, seed = self.cfg, self.rank_seed
        if cfg["num_threads"] is not None:
            torch.set_num_threads(cfg["num_threads"])
        device = build.resolve_device(cfg["device"])
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"work dir {str(self.work_dir)!r}: cannot create it ({exc.strerror or exc})") from exc
        self.logger = get_logger(name=self.exp_name, log_file=self.work_dir / f"{self.exp_name}.log",
                                 distributed=self.distributed)
        if self.rank == 0:
            self._check_files()
            if self.resume_path is None:  # a resumed run writes it once the checkpoint was accepted (_begin)
                dump_config(self.cfg, self.dirs.config_file)
        self.tracer = build.enable_trace(self.work_dir, self.rank, cfg["profile"], self.distributed)
        seed_everything(seed)
        self.env, self.eval_env = build.make_envs(cfg, seed)
        self.policy = build.make_policy(cfg, self.env, device, seed)
        needs = build.policy_needs(self.policy)
        if self.distributed:
            self.policy.setup_distributed()  # collective: identical networks, DDP wrappers, gradient averaging
        self.collector = Collector(self.env, self.policy, seed=seed)
        self.evaluator = Evaluator(self.eval_env, self.policy, cfg["eval"]["episodes"], seed=derived_seed(cfg["seed"], 2))
        self.buffer = None if needs.on_policy else build.make_buffer(cfg, self.env, seed, needs.batch_size)
        self.learner = build.make_learner(cfg, self.policy, needs, self.work_dir, self.logger, self.rank, self.world_size)
        self.eval_hook = build.add_default_hooks(self.learner, cfg, self.evaluator)

        train = cfg["train"]
        schedule = UpdateSchedule(train["updates_per_step"])
        if needs.on_policy:
            self.loop = OnPolicyLoop(self.learner, self.collector, self.world_size, rollout_steps=needs.rollout_steps,
                                     max_env_steps=train["max_env_steps"], device=self.policy.device)
        else:
            self.loop = OffPolicyLoop(self.learner, self.collector, self.buffer, self.world_size,
                                      max_env_steps=train["max_env_steps"], collect_steps=train["collect_steps"],
                                      learning_starts=needs.learning_starts, batch_size=needs.batch_size,
                                      schedule=schedule)
        self.learner.register_state("collector", self.collector)
        self.learner.register_state("evaluator", self.evaluator)
        self.learner.register_state(STATE_NAME, RunState(self.world_size, self.eval_hook.state, schedule))
        if self.buffer is not None:
            self.learner.register_state("replay_buffer", self.buffer)

    @property
    def envstep(self) -> int:
        """Env steps collected so far by all ranks (every rank collects the same number per step)."""
        return self.loop.envstep

    def run(self) -> RunResult:
        """Train until ``train.max_env_steps``, ``eval.stop_value`` or Ctrl-C; returns a :class:`RunResult`."""
        if self._closed:
            raise RuntimeError("this Trainer has already run (or was closed); build a new one")
        try:
            complete = self.complete
            if complete is not None:  # nothing left to do: say so on the console (rank 0), write nothing
                if self.rank == 0:
                    complete.report(self.exp_name, self.work_dir)
                return self._result(train_iter=complete.train_iter, envstep=complete.envstep,
                                    stop_reason=complete.reason, last_eval=complete.last_eval, already_complete=True)
            with TerminatedByLauncher(self.distributed):
                return self._run()
        except BaseException as exc:
            self._log_fatal(exc)
            raise
        finally:
            self.close()

    def _log_fatal(self, exc: BaseException) -> None:
        """The error that ends a run as the last line of this rank's log (whatever the console shows): the
        error, where it was raised (file, line, function) and the counters when it happened."""
        if self.logger is None:
            return  # failed before the log existed: the console has it all
        learner, loop = self.learner, self.loop
        train_iter = getattr(learner, "train_iter", None)
        envstep = loop.envstep if loop is not None else getattr(learner, "envstep", None)
        if isinstance(exc, StopNow):
            self.logger.warning("%s at train_iter %s, envstep %s", exc, train_iter, envstep)
            return
        prefix = f"rank {self.rank} of {self.world_size} stopped" if self.distributed else "run failed"
        with contextlib.suppress(Exception):  # reporting must not replace the error being reported
            self.logger.error(failure_line(exc, train_iter, envstep, prefix=prefix))

    def _check_files(self) -> None:
        """Rank 0 at start-up: remove temp files of interrupted saves; the directories the run writes must be
        writable now, not 500 iterations in (one-line ConfigError)."""
        for path in clean_stale_temp_files(self.work_dir):
            self.logger.info("removed %s (left by an interrupted save)", path)
        for directory in (self.work_dir, *(d for d in (self.dirs.ckpt_dir, self.dirs.tb_dir) if d.is_dir())):
            try:
                check_writable(directory)
            except FileWriteError as exc:
                raise ConfigError(str(exc)) from exc

    def _run(self) -> RunResult:
        from rlearn.hooks import CheckpointHook, LogShowHook
        from rlearn.progress import ProgressBar, progress_wanted

        learner = self.learner
        # the guard stays until the last checkpoint is written: a second signal during a slow save stops at once.
        # A signal before the loop (start-up, the resume, a tracking writer starting) stops it at its first safe
        # point, with a checkpoint, like a signal during training.
        with InterruptGuard(enabled=not self.distributed) as guard:
            if self._startup_signal is not None:
                guard.request(self._startup_signal)
            self._begin()
            bar = ProgressBar(self.cfg["train"]["max_env_steps"], self.envstep,
                              enabled=self.rank == 0 and progress_wanted(self.progress_requested), desc=self.exp_name)
            with bar:
                stop_reason = self._loop(guard, bar)
                if stop_reason == INTERRUPTED:
                    self.logger.warning("%s: stopping at train_iter %d, envstep %d; saving a checkpoint",
                                        guard.reason, learner.train_iter, self.envstep)
                else:
                    self.eval_hook.evaluate_at_end(learner)
                    bar.update(self.envstep, self.eval_hook.last_return)
            learner.get_hook(LogShowHook).final_log(learner)  # a last table of the iterations since the previous one
            if stop_reason != INTERRUPTED and self.eval_hook.state.last_result:  # TensorBoard's HParams tab
                learner.write_hparams({"evaluator/episode_return_mean": self.eval_hook.state.last_result["episode_return_mean"]})
            if self.distributed:
                check_ranks_agree(self.policy, self.logger, self.rank, self.world_size)
            if stop_reason == INTERRUPTED:  # through the CheckpointHook: latest.pt and pruning follow
                learner.get_hook(CheckpointHook).save(learner)
            learner.call_hook("after_run")
        learner.close()  # finishes W&B / MLflow runs: a writer that fails there is in the summary too
        progress, best = self.eval_hook.progress, self.eval_hook.best_path(learner)
        result = self._result(
            train_iter=learner.train_iter, envstep=self.envstep, stop_reason=stop_reason,
            stop_signal=guard.signal_name if stop_reason == INTERRUPTED else None,
            last_eval=copy.deepcopy(self.eval_hook.state.last_result), failed_writers=dict(learner.failed_writers),
            trace_dir=(self.work_dir / "trace") if self.tracer is not None else None,
            best_checkpoint=best if best is not None and best.is_file() else None,
            best_eval=None if progress.best_return is None else {"episode_return_mean": progress.best_return,
                                                                 "envstep": progress.best_envstep,
                                                                 "train_iter": progress.best_iter})
        for line in summary_lines(result):
            self.logger.info(line)
        if self.distributed:
            # leave together: a rank that tears down the process group while rank 0 still writes its last
            # checkpoint can abort gloo's connection threads ("terminate called without an active exception")
            dist.barrier()
        return result

    def _begin(self) -> None:
        """Before the loop: load the checkpoint of a resumed run, start the hooks, record the config, say what
        starts."""
        learner = self.learner
        if self.resume_path is not None:
            self._resume()
            if self.rank == 0:  # only now: a refused resume leaves config.py as it was
                dump_config(self.cfg, self.dirs.config_file)
        learner.call_hook("before_run")  # hooks declare their monitor keys (TimerHook) and start their clocks
        learner.check_monitor_windows()  # strict: a misspelt monitor_windows key stops the run before any event
        learner.write_config()  # the resolved config: TensorBoard text, W&B config, MLflow parameters
        self.logger.info("exp %s: %s on %s x%d, %s, work dir %s", self.exp_name, type(self.policy).__name__,
                         self.cfg["env"]["id"], self.cfg["env"]["num_envs"],
                         f"resuming at envstep {self.envstep}" if self.resume_path else "starting", self.work_dir)
        if self.dirs.moved_from is not None:
            self.logger.warning("%s already holds a run: this new run writes to %s (--resume alone continues the "
                                "most recent run of this exp_name; continue another one with --resume --work-dir "
                                "DIR)", self.dirs.moved_from, self.work_dir)

    def _loop(self, guard: InterruptGuard, bar: Any) -> str:
        """Loop steps until done; the stop reason. Between two steps: Ctrl-C, progress, evaluation."""
        # a checkpoint saved after a collection's iterations but before its evaluation resumes here: evaluate
        # now, at the env step of an uninterrupted run, not one collection later
        if self.loop.between_steps() and self.eval_hook.evaluate_if_due(self.learner):
            return self.eval_hook.stop_reason or STOP_VALUE
        while not self.loop.finished():
            if guard.requested or self.loop.step(guard):
                return INTERRUPTED
            bar.update(self.envstep, self.eval_hook.last_return)
            if guard.requested:
                return INTERRUPTED
            if self.eval_hook.evaluate_if_due(self.learner):
                return self.eval_hook.stop_reason or STOP_VALUE
        return MAX_ENV_STEPS

    def _resume(self) -> None:
        """Load the checkpoint (one the learner cannot take is a CheckpointError naming the file), give ranks
        > 0 their own random streams, log config changes."""
        for path, reason in self.dirs.resume_skipped:
            self.logger.warning("--resume: skipped %s (%s)", path, reason)
        if self.dirs.resume_skipped:
            self.logger.warning("--resume: continuing from %s, the newest valid checkpoint", self.resume_path)
        try:
            checkpoint = self.learner.load_checkpoint(self.resume_path)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RuntimeError) as exc:
            if isinstance(exc, (CheckpointError, ConfigError, dist.DistributedError)):
                raise
            raise CheckpointError(f"checkpoint {str(self.resume_path)!r} cannot be resumed: {type(exc).__name__}: "
                                  f"{build.error_message(exc)}") from exc
        if self.envstep != self.learner.envstep:
            self.logger.warning("checkpoint %s: collector envstep %d (x%d ranks) differs from the learner's %d",
                                self.resume_path, self.collector.envstep, self.world_size, self.learner.envstep)
        if self.rank > 0:
            rederive_rank_streams(self.rank_seed, self.learner.train_iter, self.policy, self.buffer)
        saved = checkpoint.get("config")
        if isinstance(saved, Mapping):
            old, new = flatten(saved), flatten(self.cfg)
            changes = [f"{k}: {old.get(k, '<absent>')!r} -> {new.get(k, '<absent>')!r}"
                       for k in sorted(set(old) | set(new)) if old.get(k, object()) != new.get(k, object())]
            if changes:
                self.logger.info("resumed with config changes: %s", "; ".join(changes))

    def close(self) -> None:
        """Close environments, the TensorBoard writer, the trace and this run's log file, and leave the
        process group if this run joined it (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for env in (self.env, self.eval_env):
            if env is not None:
                with contextlib.suppress(Exception):  # closing must not hide the error that brought us here
                    env.close()
        if self.learner is not None:
            self.learner.close()
        if self.tracer is not None:
            from rlearn import trace

            trace.disable()
        if self.logger is not None:
            _detach_file_handler(self.logger, self.log_file)
        if getattr(self, "dirs", None) is not None:
            self.dirs.release()  # the work dir is free for another run (or a --resume) now
        if self._owns_process_group:
            self._owns_process_group = False
            from rlearn.distributed.ddp import leave_process_group

            leave_process_group(getattr(self, "policy", None))  # DDP wrappers unwrapped and collected first

    def _result(self, **fields: Any) -> RunResult:
        """A :class:`RunResult` of this run's files and config, with the given counters and outcome."""
        latest = self.dirs.ckpt_dir / "latest.pt"
        return RunResult(work_dir=self.work_dir, exp_name=self.exp_name, log_file=self.log_file,
                         tb_dir=self.dirs.tb_dir, ckpt_dir=self.dirs.ckpt_dir,
                         latest_checkpoint=latest if latest.is_file() else None, config_file=self.dirs.config_file,
                         config=copy.deepcopy(self.cfg), **fields)


def _detach_file_handler(logger: Any, path: Path) -> None:
    """Close and remove the handler writing ``path`` (a later run of the same logger name must not write there)."""
    import logging

    target = path.resolve()
    for handler in list(logger.handlers):
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).resolve() == target:
            logger.removeHandler(handler)
            handler.close()


def train(cfg: Union[str, Path, Mapping[str, Any]], work_dir: Union[str, Path, None] = None, resume: ResumeArg = None,
          progress: Optional[bool] = None) -> RunResult:
    """Train a policy from ``cfg`` (a dict, a config file or a bundled config name), in this process or as one rank
    of a ``torchrun`` launch (docs/distributed.md). ``work_dir``: default ``work_dirs/<exp_name>`` or the next free
    ``<exp_name>_2``...; ``resume``: True for ``<work_dir>/ckpt/latest.pt``, or a checkpoint path; ``progress``:
    the progress bar (None: on a terminal). Raises ConfigError / CheckpointError for a bad config / checkpoint."""
    return Trainer(cfg, work_dir=work_dir, resume=resume, progress=progress).run()
