"""``serial_pipeline``: one process trains a policy from one config, from environments to files.

Data flow of one run (docs/architecture.md, "Pipeline")::

    vector env -> Collector -> ReplayBuffer (off-policy) / rollout tensors (on-policy)
               -> BaseLearner.train -> policy._forward_learn -> monitor -> hooks -> log, tb/, ckpt/

* **Off-policy** (``policy.on_policy == False``, TD3): collect ``train.collect_steps`` steps per
  environment, add them to the replay buffer; once ``envstep >= policy.learning_starts``, every collected
  env step earns ``train.updates_per_step`` learner iterations (fractions carry over to the next
  collection), each on ``buffer.sample(policy.batch_size)``.
* **On-policy** (PPG, the custom REINFORCE example): collect ``policy.rollout_steps`` steps per
  environment and call ``learner.train`` once on the ``[T, N, ...]`` rollout.
* Every ended episode is recorded as ``collector/episode_return`` and ``collector/episode_length`` in
  the learner's monitor (irregular metrics like any other).
* Every ``eval.freq`` env steps, and at the end, the deterministic policy plays ``eval.episodes``
  episodes on separate environments; the result goes to the log (a line and a table) and TensorBoard
  (``evaluator_step/<k>`` at step = envstep, ``evaluator_iter/<k>`` at step = train_iter). Reaching
  ``eval.stop_value`` ends the run.

Everything a resumed run needs (collector and evaluator counters, the replay buffer, the pipeline's own
counters) is registered with ``learner.register_state``, so every checkpoint carries it and
``resume`` continues the counters exactly. Ctrl-C stops at the next safe point (after the current
collection or train iteration), saves a checkpoint and returns; a second Ctrl-C stops at once.

**Several processes** (launched by ``torchrun``, or ``rlearn train CONFIG --nproc N``; docs/distributed.md):
the pipeline joins the process group first, every rank collects with its own environments and seeds
(``seed + 1000 * rank``), the policy's networks are made identical and wrapped in DDP
(:meth:`policies.Policy.setup_distributed`), counters are global (``envstep`` = the sum over ranks,
``train_iter`` the same everywhere), the log table is reduced across ranks by presence, rank 0 alone
writes TensorBoard, checkpoints and ``config.py`` and evaluates (its stop decision is broadcast), and
every rank keeps its own log file and trace records.
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

import numpy as np

from rlearn.config import ConfigError, default_work_dir, dump_config, flatten, load_config, resolve_config
from rlearn import distributed as dist
from rlearn.logging.logger import rank_log_file

__all__ = [
    "serial_pipeline", "SerialPipeline", "PipelineResult", "RunState", "summary_lines", "episode_window",
    "EPISODE_KEYS", "EPISODES_PER_WINDOW",
]

#: monitor keys of ended exploration episodes
EPISODE_KEYS = ("collector/episode_return", "collector/episode_length")
#: the default window of the episode keys holds about this many episodes (see episode_window)
EPISODES_PER_WINDOW = 10
#: assumed episode length when the environment has no time limit in its spec
DEFAULT_EPISODE_STEPS = 1000
#: rank ``r`` of a multi-process run seeds its environments, policy, buffer and RNGs with ``seed + r * RANK_SEED_STRIDE``
RANK_SEED_STRIDE = 1000
#: keys of an evaluation result written to TensorBoard
EVAL_TB_KEYS = ("episode_return_mean", "episode_return_std", "episode_return_min", "episode_return_max",
                "episode_length_mean")


@dataclass
class PipelineResult:
    """What a run did and where its files are.

    Attributes:
        stop_reason: ``"max_env_steps"``, ``"stop_value"`` (the evaluation return reached
            ``eval.stop_value``) or ``"interrupted"`` (Ctrl-C; a checkpoint was saved).
        last_eval: the last evaluation (``episode_return_mean``... see :class:`rlearn.env.Evaluator`), or None.
        latest_checkpoint: ``<work_dir>/ckpt/latest.pt`` if it exists.
    """

    work_dir: Path
    exp_name: str
    train_iter: int
    envstep: int
    stop_reason: str
    last_eval: Optional[Dict[str, float]]
    log_file: Path
    tb_dir: Path
    ckpt_dir: Path
    latest_checkpoint: Optional[Path]
    config_file: Path
    trace_dir: Optional[Path] = None
    config: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def interrupted(self) -> bool:
        return self.stop_reason == "interrupted"

    def as_dict(self) -> Dict[str, Any]:
        """The result with paths as strings (JSON-friendly)."""
        out = {}
        for key, value in self.__dict__.items():
            out[key] = str(value) if isinstance(value, Path) else value
        return out


class RunState:
    """The pipeline's own counters, saved in checkpoints under ``"pipeline"``.

    Attributes:
        last_eval_envstep: envstep of the last evaluation (0 before the first).
        last_eval_iter: train_iter of the last evaluation.
        last_eval: the last evaluation result.
        update_credit: fraction of a learner iteration earned but not run yet (off-policy).
        pending_updates: iterations earned by the last collection and not run yet (off-policy; non-zero
            only in a checkpoint taken between two of them).
        world_size: processes of the run. A checkpoint resumes only with the same number (``envstep`` is
            the per-rank count times it); checkpoints without the entry were written by one process.
    """

    def __init__(self, world_size: int = 1) -> None:
        self.world_size = world_size
        self.last_eval_envstep = 0
        self.last_eval_iter = 0
        self.last_eval: Optional[Dict[str, float]] = None
        self.update_credit = 0.0
        self.pending_updates = 0

    def state_dict(self) -> Dict[str, Any]:
        return {
            "last_eval_envstep": self.last_eval_envstep,
            "last_eval_iter": self.last_eval_iter,
            "last_eval": copy.deepcopy(self.last_eval),
            "update_credit": self.update_credit,
            "pending_updates": self.pending_updates,
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        expected = {"last_eval_envstep", "last_eval_iter", "last_eval", "update_credit", "pending_updates"}
        if not isinstance(state, Mapping) or set(state) - {"world_size"} != expected:
            keys = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"pipeline state: expected keys {sorted(expected | {'world_size'})}, got {keys}")
        saved_world = int(state.get("world_size", 1))
        if saved_world != self.world_size:
            how = f"--nproc {saved_world}" if saved_world > 1 else "one process (without --nproc)"
            raise ValueError(
                f"written by a run of {saved_world} process(es), this run has {self.world_size}; resume it with {how}"
            )
        self.last_eval_envstep = int(state["last_eval_envstep"])
        self.last_eval_iter = int(state["last_eval_iter"])
        self.last_eval = copy.deepcopy(state["last_eval"])
        self.update_credit = float(state["update_credit"])
        self.pending_updates = int(state["pending_updates"])


class _InterruptGuard:
    """Turns the first SIGINT into a flag checked at safe points; the second raises KeyboardInterrupt.

    Only installed in the main thread (signal handlers cannot be set elsewhere), and not at all with
    ``enabled=False`` (multi-process runs: the ranks could not agree on where to stop without a collective
    per iteration, so Ctrl-C stops every rank at once, as the default SIGINT handler does).
    """

    def __init__(self, enabled: bool = True) -> None:
        self.requested = False
        self.enabled = enabled
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> "_InterruptGuard":
        if self.enabled and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False


class _TerminatedByLauncher:
    """In a multi-process run, turns SIGTERM (what torchrun sends every rank when one of them failed) into
    a :class:`rlearn.distributed.DistributedError`, so the rank closes its files and its log says why it stopped."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._previous: Any = None

    def __enter__(self) -> "_TerminatedByLauncher":
        if self.enabled and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    @staticmethod
    def _handle(signum: int, frame: Any) -> None:
        raise dist.DistributedError(
            f"rank {dist.get_rank()}: terminated by SIGTERM from the launcher, usually because another rank "
            "failed (its traceback and log file say why)"
        )

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


def episode_window(cfg: Mapping[str, Any], iters_per_envstep: float, max_episode_steps: Optional[int]) -> int:
    """Default monitor window (in train iterations) of the episode keys.

    An episode ends about every ``max_episode_steps`` env steps (summed over environments), and the
    learner runs ``iters_per_envstep`` iterations per env step, so a window of ``log_freq`` iterations
    often holds no ended episode at all (TD3 on Pendulum: 100 iterations vs 200-step episodes), and the
    table would show ``-``. The window is widened to hold about :data:`EPISODES_PER_WINDOW` full-length
    episodes, never narrower than ``learner.monitor_window``.
    """
    learner = cfg["learner"]
    base = learner["monitor_window"] or learner["log_freq"]
    length = max_episode_steps or DEFAULT_EPISODE_STEPS
    return max(int(base), int(math.ceil(EPISODES_PER_WINDOW * length * iters_per_envstep)))


@contextlib.contextmanager
def _workers_ignore_sigint(asynchronous: bool) -> Iterator[None]:
    """Ignore SIGINT while environment worker processes start, so that they inherit "ignore".

    Ctrl-C in a terminal reaches every process of the foreground group: without this, each worker would
    die with KeyboardInterrupt in the middle of a step, and the run could not stop cleanly. The main
    process handles Ctrl-C and closes the workers itself.
    """
    if not asynchronous or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _derived_seed(seed: int, stream: int) -> int:
    """A seed for another random stream (the evaluation environments), far from ``seed + i``."""
    return int(np.random.SeedSequence([seed, stream]).generate_state(1)[0] % 2**31)


def _run_exists(work_dir: Path) -> Optional[str]:
    ckpt = work_dir / "ckpt"
    if ckpt.is_dir() and any(ckpt.glob("*.pt")):
        return f"{ckpt} holds checkpoints"
    tb = work_dir / "tb"
    if tb.is_dir() and any("tfevents" in p.name for p in tb.rglob("*")):
        return f"{tb} holds TensorBoard events"
    return None


def _free_work_dir(default: Path) -> Path:
    """``default`` if it holds no run yet, else the first of ``<default>_2``, ``<default>_3``... that does not."""
    candidate, n = default, 1
    while _run_exists(candidate):
        n += 1
        candidate = default.with_name(f"{default.name}_{n}")
    return candidate


def _detach_file_handler(logger: Any, path: Path) -> None:
    """Close and remove the handler writing ``path`` (so a later run with the same logger name does not
    write into this run's log)."""
    import logging

    target = path.resolve()
    for handler in list(logger.handlers):
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).resolve() == target:
            logger.removeHandler(handler)
            handler.close()


class SerialPipeline:
    """Builds every component of a run from a resolved config; :meth:`run` trains.

    Most users call :func:`serial_pipeline`. Building is separate so that tests and tools can look at
    (or replace) a component before the run starts: ``env``, ``eval_env``, ``policy``, ``collector``,
    ``evaluator``, ``buffer`` (None on-policy), ``learner``, ``logger``.
    """

    def __init__(
        self,
        cfg: Mapping[str, Any],
        work_dir: Union[str, Path, None] = None,
        resume: Union[bool, str, Path, None] = None,
        progress: Optional[bool] = None,
    ) -> None:
        self.cfg: Dict[str, Any] = resolve_config(cfg) if isinstance(cfg, Mapping) else load_config(cfg)
        self.exp_name: str = self.cfg["exp_name"]
        # join the process group before touching the disk (single process: nothing happens)
        joined_before = dist.is_distributed()
        self.distributed = dist.init_distributed(self.cfg["dist"]["backend"], timeout_s=self.cfg["dist"]["timeout_s"])
        self._owns_process_group = self.distributed and not joined_before
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.rank_seed = self.cfg["seed"] + RANK_SEED_STRIDE * self.rank
        self.moved_from: Optional[Path] = None  # the default work dir, when it was taken and another was used
        if work_dir is not None:
            self.work_dir = Path(work_dir)
        elif resume is None or resume is False:
            # rank 0 picks the directory; the others must not look after rank 0 may have started writing
            self.work_dir = dist.broadcast_object(_free_work_dir(default_work_dir(self.cfg)) if self.rank == 0 else None)
            if self.work_dir != default_work_dir(self.cfg):
                self.moved_from = default_work_dir(self.cfg)
        else:
            self.work_dir = default_work_dir(self.cfg)
        #: this rank's text log: ``<exp_name>.log`` on rank 0, ``<exp_name>_rank<r>.log`` on rank r
        self.log_file = rank_log_file(self.work_dir / f"{self.exp_name}.log", self.rank)
        self.tb_dir = self.work_dir / "tb"
        self.ckpt_dir = self.work_dir / "ckpt"
        self.config_file = self.work_dir / "config.py"
        self.resume_path = self._resume_path(resume)
        self.progress_requested = progress
        self.state = RunState(self.world_size)
        self.env: Any = None
        self.eval_env: Any = None
        self.tracer: Any = None
        self._closed = False
        try:
            self._build()
        except BaseException:
            self._leave_process_group()
            raise

    # ------------------------------------------------------------------------------------------ build
    def _resume_path(self, resume: Union[bool, str, Path, None]) -> Optional[Path]:
        if resume is None or resume is False:
            existing = _run_exists(self.work_dir)
            if existing:
                raise ConfigError(
                    f"work dir {str(self.work_dir)!r} already holds a run ({existing}); continue it with "
                    f"--resume, or choose another --work-dir (or delete it)"
                )
            return None
        path = self.ckpt_dir / "latest.pt" if resume is True else Path(resume)
        if not path.is_file():
            raise ConfigError(f"--resume: no checkpoint at {str(path)!r}")
        return path

    def _build(self) -> None:
        import torch

        from rlearn.logging import get_logger

        cfg = self.cfg
        if cfg["num_threads"] is not None:
            torch.set_num_threads(cfg["num_threads"])
        device = self._device(cfg["device"])
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.logger = get_logger(name=self.exp_name, log_file=self.work_dir / f"{self.exp_name}.log",
                                 distributed=self.distributed)
        try:
            if self.rank == 0:
                dump_config(cfg, self.config_file)
            self._enable_trace()
            _seed_everything(self.rank_seed)
            self._build_components(device)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _device(name: str) -> str:
        import torch

        if name == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        try:
            torch.device(name)
        except (RuntimeError, ValueError) as exc:
            raise ConfigError(f"config key 'device': {exc}") from exc
        return name

    def _enable_trace(self) -> None:
        from rlearn import trace

        try:
            self.tracer = trace.enable_from_env(self.work_dir, rank=self.rank, cfg_flag=self.cfg["profile"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        if self.tracer is not None and self.distributed:
            # collective; tracing is on for every rank or none (same config and environment)
            offset = dist.measure_clock_offset()
            trace.set_clock_offset(offset.offset_ns, offset.error_ns)

    def _build_components(self, device: str) -> None:
        from rlearn.registry import get_policy_class
        from rlearn.buffer import ReplayBuffer
        from rlearn.collect import Collector, Evaluator
        from rlearn.env import make_vector_env, observation_dtype
        from rlearn.hooks import CheckpointHook, LogShowHook, TimerHook
        from rlearn.learner import BaseLearner

        cfg, env_cfg, seed = self.cfg, self.cfg["env"], self.rank_seed
        try:
            with _workers_ignore_sigint(env_cfg["asynchronous"]):
                self.env = make_vector_env(env_cfg["id"], env_cfg["num_envs"], seed=seed,
                                           asynchronous=env_cfg["asynchronous"], env_kwargs=env_cfg["kwargs"])
                # evaluation (rank 0 only) uses the config's seed, as a one-process run does
                self.eval_env = make_vector_env(env_cfg["id"], cfg["eval"]["num_envs"], seed=_derived_seed(cfg["seed"], 1),
                                                asynchronous=env_cfg["asynchronous"], env_kwargs=env_cfg["kwargs"])
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"env ({env_cfg['id']!r}): {exc}") from exc

        policy_cfg = {k: v for k, v in cfg["policy"].items() if k != "type"}
        policy_cls = get_policy_class(cfg["policy"]["type"])
        try:
            self.policy = policy_cls(policy_cfg, self.env.single_observation_space, self.env.single_action_space,
                                     device=device, seed=seed)
        except (ValueError, KeyError, TypeError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise ConfigError(f"policy {cfg['policy']['type']!r} ({policy_cls.__name__}): {message}") from exc
        self.on_policy = bool(getattr(self.policy, "on_policy", False))
        self._check_policy_keys()
        if self.distributed:
            self.policy.setup_distributed()  # collective: identical networks, DDP wrappers, gradient averaging

        self.collector = Collector(self.env, self.policy, seed=seed)
        self.evaluator = Evaluator(self.eval_env, self.policy, cfg["eval"]["episodes"], seed=_derived_seed(cfg["seed"], 2))
        self.buffer = None
        if not self.on_policy:
            obs_space, act_space = self.env.single_observation_space, self.env.single_action_space
            self.buffer = ReplayBuffer(
                cfg["buffer"]["size"], obs_space.shape, act_space.shape,
                obs_dtype=observation_dtype(obs_space, "ReplayBuffer"),
                action_dtype=np.float32 if np.issubdtype(act_space.dtype, np.floating) else act_space.dtype,
                seed=seed,
            )

        learner_cfg = copy.deepcopy(cfg["learner"])
        window = episode_window(cfg, self._iters_per_envstep(), self._max_episode_steps())
        for key in EPISODE_KEYS:
            learner_cfg["monitor_windows"].setdefault(key, window)
        try:
            self.learner = BaseLearner(self.policy, learner_cfg, work_dir=self.work_dir, logger=self.logger,
                                       rank=self.rank, world_size=self.world_size)
        except (ValueError, KeyError, TypeError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise ConfigError(f"learner: {message}") from exc
        self.learner.run_config = copy.deepcopy(cfg)
        self.learner.declare_monitor_vars(list(EPISODE_KEYS))
        present = {type(hook) for hook in self.learner.hooks}
        if TimerHook not in present:
            self.learner.register_hook(TimerHook())
        if LogShowHook not in present:
            self.learner.register_hook(LogShowHook(freq=cfg["learner"]["log_freq"]))
        if CheckpointHook not in present:
            self.learner.register_hook(CheckpointHook(freq=cfg["checkpoint"]["freq"], keep=cfg["checkpoint"]["keep"]))

        self.learner.register_state("collector", self.collector)
        self.learner.register_state("evaluator", self.evaluator)
        self.learner.register_state("pipeline", self.state)
        if self.buffer is not None:
            self.learner.register_state("replay_buffer", self.buffer)

    def _check_policy_keys(self) -> None:
        pcfg, name = self.policy.cfg, type(self.policy).__name__
        needed = ("rollout_steps",) if self.on_policy else ("batch_size",)
        for key in needed:
            value = pcfg.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                kind = "on-policy" if self.on_policy else "off-policy"
                raise ConfigError(
                    f"policy {name} is {kind}: the pipeline needs 'policy.{key}' (an int >= 1) in its "
                    f"default_config, got {value!r}"
                )
        self.rollout_steps = int(pcfg.get("rollout_steps") or 0)
        self.batch_size = int(pcfg.get("batch_size") or 0)
        self.learning_starts = int(pcfg.get("learning_starts") or 0)

    def _max_episode_steps(self) -> Optional[int]:
        """The environment's time limit (``env.kwargs.max_episode_steps`` or its registered spec), if any."""
        from rlearn.env.vector_env import resolve_env_spec

        env_cfg = self.cfg["env"]
        limit = env_cfg["kwargs"].get("max_episode_steps")
        if limit is None:
            limit = resolve_env_spec(env_cfg["id"]).max_episode_steps
        return int(limit) if isinstance(limit, int) and limit > 0 else None

    def _iters_per_envstep(self) -> float:
        if self.on_policy:
            return 1.0 / (self.rollout_steps * self.cfg["env"]["num_envs"])
        return float(self.cfg["train"]["updates_per_step"])

    @property
    def envstep(self) -> int:
        """Env steps collected so far by all ranks (every rank collects the same number per step)."""
        return self.collector.envstep * self.world_size

    # -------------------------------------------------------------------------------------------- run
    def run(self) -> PipelineResult:
        """Train until ``train.max_env_steps``, ``eval.stop_value`` or Ctrl-C; returns a :class:`PipelineResult`."""
        if self._closed:
            raise RuntimeError("this SerialPipeline has already run (or was closed); build a new one")
        learner = self.learner
        try:
            with _TerminatedByLauncher(self.distributed):
                return self._run(learner)
        except BaseException as exc:
            if self.distributed:  # this rank's log file says why it stopped, whatever the console shows
                self.logger.error("rank %d of %d stopped: %s: %s", self.rank, self.world_size, type(exc).__name__, exc)
            raise
        finally:
            self.close()

    def _run(self, learner: Any) -> PipelineResult:
        """The body of :meth:`run` (which adds the signal handling, the error line and closing)."""
        from rlearn.progress import ProgressBar, progress_wanted

        if self.resume_path is not None:
            self._resume()
        self.logger.info(
            "exp %s: %s on %s x%d, %s, work dir %s", self.exp_name, type(self.policy).__name__,
            self.cfg["env"]["id"], self.cfg["env"]["num_envs"],
            f"resuming at envstep {self.envstep}" if self.resume_path else "starting",
            self.work_dir,
        )
        if self.moved_from is not None:
            self.logger.warning(
                "%s already holds a run: this new run writes to %s (continue the other one with --resume; "
                "choose the directory with --work-dir)", self.moved_from, self.work_dir,
            )
        self._iter_at_start = learner.train_iter
        learner.call_hook("before_run")
        bar = ProgressBar(self.cfg["train"]["max_env_steps"], self.envstep,
                          enabled=self.rank == 0 and progress_wanted(self.progress_requested), desc=self.exp_name)
        self._bar = bar
        with _InterruptGuard(enabled=not self.distributed) as guard, bar:
            stop_reason = self._loop(guard)
            if stop_reason != "interrupted" and self.state.last_eval_envstep != self.envstep:
                self._evaluate()
                bar.update(self.envstep, self._last_return())
        self._final_log()
        if self.distributed:
            self._check_ranks_agree()
        if stop_reason == "interrupted":
            self._save_now()
        learner.call_hook("after_run")
        result = self._result(stop_reason)
        for line in summary_lines(result):
            self.logger.info(line)
        return result

    def _loop(self, guard: _InterruptGuard) -> str:
        max_steps = self.cfg["train"]["max_env_steps"]
        while self.envstep < max_steps or self.state.pending_updates > 0:
            if guard.requested:
                return self._interrupted()
            if self.on_policy:
                self._on_policy_step()
            else:
                if self.state.pending_updates == 0:
                    self._collect_off_policy()
                if self._run_updates(guard):
                    return self._interrupted()
            self._bar.update(self.envstep, self._last_return())
            if guard.requested:
                return self._interrupted()
            if self._eval_due() and self._evaluate():
                return "stop_value"
        return "max_env_steps"

    def _interrupted(self) -> str:
        self.logger.warning(
            "Ctrl-C: stopping at train_iter %d, envstep %d; saving a checkpoint",
            self.learner.train_iter, self.envstep,
        )
        return "interrupted"

    def _collect(self, n_steps: int) -> Any:
        self.learner.call_hook("before_collect")
        result = self.collector.collect(n_steps)
        self.learner.envstep = self.envstep  # also before learning starts (checkpoints, hooks)
        self.learner.call_hook("after_collect")
        for episode in result.episodes:
            self.learner.record({
                "collector/episode_return": episode["episode_return"],
                "collector/episode_length": episode["episode_length"],
            })
        # [writers branch] the policy's collect-side metrics (epsilon...) -> monitor as collector/<key>
        if result.metrics:
            self.learner.record_collect(result.metrics)
        return result

    def _on_policy_step(self) -> None:
        from rlearn.buffer import rollout_to_tensors

        from rlearn.trace import span

        result = self._collect(self.rollout_steps)
        with span("learner/data", lane="learner"):
            data = rollout_to_tensors(result, device=self.policy.device)
        self.learner.train(data, envstep=self.envstep)

    def _collect_off_policy(self) -> None:
        # learning_starts and updates_per_step count this rank's own steps: each rank samples its own buffer
        before = self.collector.envstep
        result = self._collect(self.cfg["train"]["collect_steps"])
        self.buffer.add(result.transitions)
        if self.collector.envstep >= self.learning_starts:
            self.state.update_credit += self.cfg["train"]["updates_per_step"] * (self.collector.envstep - before)
            earned = int(math.floor(self.state.update_credit + 1e-9))
            self.state.update_credit = max(0.0, self.state.update_credit - earned)
            self.state.pending_updates = earned

    def _run_updates(self, guard: _InterruptGuard) -> bool:
        """Run the pending learner iterations; True if Ctrl-C came in between."""
        from rlearn.trace import span

        while self.state.pending_updates > 0:
            self.state.pending_updates -= 1  # before train(): a checkpoint in after_iter must not count it again
            with span("learner/data", lane="learner"):
                batch = self.buffer.sample(self.batch_size)
            self.learner.train(batch, envstep=self.envstep)
            if guard.requested:
                return True
        return False

    # ------------------------------------------------------------------------------------- evaluation
    def _eval_due(self) -> bool:
        freq = self.cfg["eval"]["freq"]
        if freq is None:
            return False
        return self.envstep // freq > self.state.last_eval_envstep // freq

    def _last_return(self) -> Optional[float]:
        return None if self.state.last_eval is None else self.state.last_eval["episode_return_mean"]

    def _evaluate(self) -> bool:
        """Evaluate now (rank 0), report the result; True when ``eval.stop_value`` is reached.

        In a multi-process run only rank 0 plays the episodes, while the other ranks wait for its result
        and stop decision (one broadcast), so every rank stops at the same iteration.
        """
        from rlearn.trace import span

        learner, envstep = self.learner, self.envstep
        learner.call_hook("before_eval")
        if self.rank == 0:
            with span("evaluator/eval", lane="evaluator", iter=learner.train_iter):
                result, stop = self._evaluate_and_report(envstep)
        else:
            result, stop = None, False
        if self.distributed:
            with span("evaluator/wait_for_rank0", lane="evaluator", iter=learner.train_iter):
                result, stop = dist.broadcast_object((result, stop))
        self.state.last_eval, self.state.last_eval_envstep, self.state.last_eval_iter = result, envstep, learner.train_iter
        learner.call_hook("after_eval")
        return stop

    def _evaluate_and_report(self, envstep: int) -> Any:
        """Play the evaluation episodes, write the log line and the result to every writer; ``(result, stop)``."""
        import torch

        learner = self.learner
        with torch.no_grad():
            result = self.evaluator.evaluate()
        self.logger.info(
            "evaluation at envstep %d (train_iter %d): episode_return %.4g +- %.4g (min %.4g, max %.4g) over %d "
            "episodes, episode_length %.1f",
            envstep, learner.train_iter, result["episode_return_mean"], result["episode_return_std"],
            result["episode_return_min"], result["episode_return_max"], result["episodes"], result["episode_length_mean"],
        )
        # [writers branch] table and TensorBoard (evaluator_iter/<k>, evaluator_step/<k>) through the writers
        learner.write_scalars({f"evaluator/{key}": result[key] for key in EVAL_TB_KEYS}, learner.train_iter, envstep)
        stop_value = self.cfg["eval"]["stop_value"]
        if stop_value is not None and result["episode_return_mean"] >= stop_value:
            self.logger.info(
                "stop_value reached: episode_return_mean %.4g >= eval.stop_value %.4g at envstep %d; stopping",
                result["episode_return_mean"], stop_value, envstep,
            )
            return result, True
        return result, False

    # ------------------------------------------------------------------------------------ checkpoints
    def _resume(self) -> None:
        checkpoint = self.learner.load_checkpoint(self.resume_path)
        if self.envstep != self.learner.envstep:
            self.logger.warning(
                "checkpoint %s: collector envstep %d (x%d ranks) differs from the learner's %d",
                self.resume_path, self.collector.envstep, self.world_size, self.learner.envstep,
            )
        if self.rank > 0:
            self._rederive_rank_streams()
        saved = checkpoint.get("config")
        if isinstance(saved, Mapping):
            old, new = flatten(saved), flatten(self.cfg)
            changes = [f"{k}: {old.get(k, '<absent>')!r} -> {new.get(k, '<absent>')!r}"
                       for k in sorted(set(old) | set(new)) if old.get(k, object()) != new.get(k, object())]
            if changes:
                self.logger.info("resumed with config changes: %s", "; ".join(changes))

    def _rederive_rank_streams(self) -> None:
        """After every rank loaded rank 0's checkpoint, give ranks > 0 their own random streams again
        (derived from ``seed + 1000 * rank`` and the iteration), so they do not replay rank 0's exploration
        and minibatches. The collector already resets its environments from this rank's seed."""
        stream = _derived_seed(self.rank_seed, self.learner.train_iter)
        _seed_everything(stream)
        self.policy.np_random = np.random.default_rng([self.rank_seed, self.learner.train_iter])
        if self.buffer is not None:
            state = self.buffer.state_dict()
            state["rng"] = np.random.default_rng([stream, 1]).bit_generator.state
            self.buffer.load_state_dict(state)

    def _check_ranks_agree(self) -> None:
        """Multi-process runs: compare a digest of every network across ranks (one all_gather) and log the
        outcome on rank 0; different parameters mean gradients were not averaged somewhere."""
        import hashlib

        digests = {}
        for name, module in self.policy.modules().items():
            h = hashlib.sha1()
            for tensor in module.state_dict().values():
                h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
            digests[name] = h.hexdigest()
        gathered = dist.all_gather_object(digests)
        if self.rank != 0:
            return
        differing = sorted(name for name in digests if any(other.get(name) != digests[name] for other in gathered))
        if differing:
            self.logger.error(
                "parameters differ across the %d ranks for %s: their gradients were not averaged (see "
                "docs/distributed.md); the checkpoint holds rank 0's", self.world_size, ", ".join(differing),
            )
        else:
            self.logger.info("parameters identical on all %d ranks (%s)", self.world_size, ", ".join(digests))

    def _save_now(self) -> Optional[Path]:
        """Save a checkpoint now (Ctrl-C), through the CheckpointHook so ``latest.pt`` and pruning follow."""
        from rlearn.hooks import CheckpointHook

        hook = self.learner.get_hook(CheckpointHook)
        path = hook.save(self.learner)
        return path

    def _final_log(self) -> None:
        """A last table for the iterations since the previous one (before the final checkpoint)."""
        from rlearn.hooks import LogShowHook

        learner = self.learner
        hook = learner.get_hook(LogShowHook)
        freq = hook.freq if hook.freq is not None else learner.cfg["log_freq"]
        # only if this run trained since the last table (a resumed run that had nothing left to do must
        # not log the checkpoint's iteration twice)
        if learner.train_iter > self._iter_at_start and learner.train_iter % freq != 0:
            hook.final_log(learner)  # [writers branch] windows end at the last completed iteration

    # ------------------------------------------------------------------------------------------ close
    def close(self) -> None:
        """Close environments, the learner's writers, the trace and this run's log file, and leave the
        process group if this pipeline joined it (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for env in (self.env, self.eval_env):
            if env is not None:
                try:
                    env.close()
                except Exception:  # closing must not hide the error that brought us here
                    pass
        learner = getattr(self, "learner", None)
        if learner is not None:
            learner.close()
        if getattr(self, "tracer", None) is not None:
            from rlearn import trace

            trace.disable()
        if getattr(self, "logger", None) is not None:
            _detach_file_handler(self.logger, self.log_file)
        self._leave_process_group()

    def _leave_process_group(self) -> None:
        if getattr(self, "_owns_process_group", False):
            self._owns_process_group = False
            dist.shutdown()

    def _result(self, stop_reason: str) -> PipelineResult:
        latest = self.ckpt_dir / "latest.pt"
        result = PipelineResult(
            work_dir=self.work_dir, exp_name=self.exp_name, train_iter=self.learner.train_iter,
            envstep=self.envstep, stop_reason=stop_reason, last_eval=copy.deepcopy(self.state.last_eval),
            log_file=self.log_file, tb_dir=self.tb_dir, ckpt_dir=self.ckpt_dir,
            latest_checkpoint=latest if latest.is_file() else None, config_file=self.config_file,
            trace_dir=(self.work_dir / "trace") if self.tracer is not None else None, config=copy.deepcopy(self.cfg),
        )
        return result


def summary_lines(result: PipelineResult) -> List[str]:
    """The closing lines of a run: why it stopped and where every file is."""
    lines = [
        f"{result.exp_name}: stopped ({result.stop_reason}) at train_iter {result.train_iter}, envstep {result.envstep}"
        + (f", last eval return {result.last_eval['episode_return_mean']:.4g}" if result.last_eval else ""),
        f"  log:         {result.log_file}",
        f"  TensorBoard: {result.tb_dir}    (view: tensorboard --logdir {result.tb_dir})",
        f"  checkpoint:  {result.latest_checkpoint or '(none)'}",
        f"  config:      {result.config_file}",
    ]
    if result.trace_dir is not None:
        lines.append(f"  trace:       {result.trace_dir}    (merge: rlearn trace {result.work_dir} -o trace.json)")
    if result.interrupted:
        lines.append(f"  resume with: rlearn train {result.config_file} --work-dir {result.work_dir} --resume")
    return lines


def serial_pipeline(
    cfg: Union[str, Path, Mapping[str, Any]],
    work_dir: Union[str, Path, None] = None,
    resume: Union[bool, str, Path, None] = None,
    progress: Optional[bool] = None,
) -> PipelineResult:
    """Train a policy from one config in this process.

    Args:
        cfg: a config dict (resolved or not: it is resolved here), a config file path or a bundled
            config name (see :mod:`rlearn.config`).
        work_dir: where the log, ``tb/``, ``ckpt/``, ``config.py`` (and ``trace/``) go; default
            ``work_dirs/<exp_name>``, or ``work_dirs/<exp_name>_2``, ``_3``... when that one already holds
            a run (checkpoints or TensorBoard events). An explicit ``work_dir`` that holds a run is refused
            (ConfigError) unless resuming: two runs writing the same curves would make them unreadable.
        resume: ``True`` continues from ``<work_dir>/ckpt/latest.pt``, a path from that checkpoint;
            counters, RNG states, replay buffer, monitor windows and TensorBoard curves continue.
        progress: show the progress bar (None: only on a terminal, unless ``RLEARN_NO_PROGRESS=1``).

    Returns:
        A :class:`PipelineResult`. Config mistakes raise :class:`rlearn.config.ConfigError`; a bad
        checkpoint raises :class:`rlearn.checkpoint.CheckpointError`.
    """
    return SerialPipeline(cfg, work_dir=work_dir, resume=resume, progress=progress).run()
