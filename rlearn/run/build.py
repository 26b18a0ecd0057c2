"""Building the parts of a run from a resolved config (device, trace, environments, policy, buffer, learner and
its default hooks); each turns a bad config value into a :class:`rlearn.config.ConfigError` naming the section."""

from __future__ import annotations

import copy
import logging
import math
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from rlearn import distributed as dist
from rlearn.config import ConfigError
from rlearn.env.checks import FiniteCheck
from rlearn.memory import available_memory
from rlearn.run.loop import EPISODE_KEYS
from rlearn.run.ranks import derived_seed
from rlearn.run.signals import workers_ignore_sigint
from rlearn.values import is_int

__all__ = [
    "EPISODES_PER_WINDOW", "DEFAULT_EPISODE_STEPS", "PolicyNeeds", "resolve_device", "enable_trace", "make_envs",
    "make_policy", "policy_needs", "make_buffer", "check_buffer_limits", "available_memory", "episode_window",
    "max_episode_steps", "make_learner", "add_default_hooks",
]

#: the default window of the episode keys holds about this many episodes (see episode_window)
EPISODES_PER_WINDOW = 10
#: assumed episode length when the environment has no time limit in its spec
DEFAULT_EPISODE_STEPS = 1000


def error_message(exc: BaseException) -> Any:
    """What an error says: a KeyError's key without the quotes ``str()`` adds."""
    return exc.args[0] if isinstance(exc, KeyError) and exc.args else exc


def resolve_device(name: str) -> str:
    """``"auto"`` -> ``"cuda"`` when available, else ``"cpu"``; any other name must be a torch device this machine
    has (a ConfigError otherwise)."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"config key 'device': {exc}") from exc
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(f"config key 'device' is {name!r} but torch finds no CUDA device here "
                              f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); use "
                              "device='cpu' or device='auto'")
        if device.index is not None and device.index >= count:
            raise ConfigError(f"config key 'device' is {name!r} but this machine has {count} CUDA device(s) "
                              f"(cuda:0..cuda:{count - 1})")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"config key 'device' is {name!r} but MPS is not available here; use device='cpu'")
    return name


def enable_trace(work_dir: Path, rank: int, cfg_flag: bool, distributed: bool) -> Any:
    """Start the timeline trace if the config or ``RLEARN_PROFILE`` asks for it; the tracer or None."""
    from rlearn import trace

    try:
        tracer = trace.enable_from_env(work_dir, rank=rank, cfg_flag=cfg_flag)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if tracer is not None and distributed:
        # collective; tracing is on for every rank or none (same config and environment)
        offset = dist.measure_clock_offset()
        trace.set_clock_offset(offset.offset_ns, offset.error_ns)
    return tracer


def make_envs(cfg: Mapping[str, Any], seed: int) -> Tuple[Any, Any]:
    """The training vector env (seeded with this rank's ``seed``) and the evaluation one (from the config's seed,
    the same on every rank), each behind a :class:`~rlearn.env.checks.FiniteCheck`."""
    from rlearn.env import make_vector_env

    env_cfg = cfg["env"]
    env = None
    try:
        with workers_ignore_sigint(env_cfg["asynchronous"]):
            # copy=False: the Collector copies the observations it keeps into its own arrays
            env = make_vector_env(env_cfg["id"], env_cfg["num_envs"], seed=seed, asynchronous=env_cfg["asynchronous"],
                                  env_kwargs=env_cfg["kwargs"], copy=False)
            eval_env = make_vector_env(env_cfg["id"], cfg["eval"]["num_envs"], seed=derived_seed(cfg["seed"], 1),
                                       asynchronous=env_cfg["asynchronous"], env_kwargs=env_cfg["kwargs"])
    except (ValueError, TypeError) as exc:
        if env is not None:
            env.close()
        raise ConfigError(f"env ({env_cfg['id']!r}): {exc}") from exc
    # a NaN observation or reward stops the run naming the environment, before any policy sees it
    return FiniteCheck(env, env_cfg["id"]), FiniteCheck(eval_env, env_cfg["id"])


def make_policy(cfg: Mapping[str, Any], env: Any, device: str, seed: int) -> Any:
    """The policy named by ``policy.type``, built from the rest of the ``policy`` section."""
    from policies.base import check_initialised
    from rlearn.registry import get_policy_class

    policy_cfg = {k: v for k, v in cfg["policy"].items() if k != "type"}
    policy_cls = get_policy_class(cfg["policy"]["type"])
    try:
        policy = policy_cls(policy_cfg, env.single_observation_space, env.single_action_space, device=device, seed=seed)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"policy {cfg['policy']['type']!r} ({policy_cls.__name__}): {error_message(exc)}") from exc
    check_initialised(policy)  # the contract, before anything reads what Policy.__init__ sets
    return policy


class PolicyNeeds(NamedTuple):
    """What the loops read from the policy's config (``rollout_steps`` on-policy, the others off-policy)."""

    on_policy: bool
    rollout_steps: int
    batch_size: int
    learning_starts: int


def policy_needs(policy: Any) -> PolicyNeeds:
    """Check the keys the loop of this kind of policy needs; a ConfigError names a missing or bad one."""
    pcfg, name = policy.cfg, type(policy).__name__
    on_policy = bool(getattr(policy, "on_policy", False))
    key = "rollout_steps" if on_policy else "batch_size"
    if not is_int(pcfg.get(key)) or pcfg[key] < 1:
        raise ConfigError(f"policy {name} is {'on' if on_policy else 'off'}-policy: the run needs 'policy.{key}' (an "
                          f"int >= 1) in its default_config, got {pcfg.get(key)!r}")
    return PolicyNeeds(on_policy, int(pcfg.get("rollout_steps") or 0), int(pcfg.get("batch_size") or 0),
                       int(pcfg.get("learning_starts") or 0))


def _buffer_dtypes(env: Any) -> Tuple[Any, Any]:
    from rlearn.env import observation_dtype

    act_space = env.single_action_space
    return (observation_dtype(env.single_observation_space, "ReplayBuffer"),
            np.float32 if np.issubdtype(act_space.dtype, np.floating) else act_space.dtype)


def _size_text(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def check_buffer_limits(cfg: Mapping[str, Any], env: Any, batch_size: Optional[int] = None,
                        memory: Optional[int] = None) -> int:
    """Refuse, before anything is allocated, a ``policy.batch_size`` above ``buffer.size`` or more transitions than
    ``memory`` (default :func:`available_memory`) holds: numpy maps the storage lazily, so the OOM killer would
    end the run hours in, once the buffer filled. Returns the bytes the transitions take at most."""
    size = cfg["buffer"]["size"]
    if batch_size is not None and batch_size > size:
        raise ConfigError(
            f"config key 'policy.batch_size' is {batch_size} but 'buffer.size' is {size}: a batch is drawn from "
            "the buffer's transitions and cannot be larger than the buffer; lower policy.batch_size or raise "
            "buffer.size")
    obs_dtype, action_dtype = _buffer_dtypes(env)
    obs_items = int(np.prod(env.single_observation_space.shape or (), dtype=np.int64))
    action_items = int(np.prod(env.single_action_space.shape or (), dtype=np.int64))
    per_transition = 2 * obs_items * np.dtype(obs_dtype).itemsize + action_items * np.dtype(action_dtype).itemsize + 8
    stored = min(size, cfg["train"]["max_env_steps"])
    needed = stored * per_transition
    memory = available_memory() if memory is None else memory
    if memory is not None and needed > memory:
        what = "a full replay buffer" if stored == size else f"the {stored} transitions of train.max_env_steps"
        raise ConfigError(
            f"config key 'buffer.size' is {size}: {what} of {cfg['env']['id']!r} ({per_transition} bytes per "
            f"transition) takes {_size_text(needed)}, but this machine has {_size_text(memory)} of memory "
            f"available; lower buffer.size (at most about {memory // per_transition:,} here)")
    return needed


def make_buffer(cfg: Mapping[str, Any], env: Any, seed: int, batch_size: Optional[int] = None) -> Any:
    """The replay buffer of an off-policy run, after :func:`check_buffer_limits`."""
    from rlearn.buffer import ReplayBuffer

    check_buffer_limits(cfg, env, batch_size)
    obs_dtype, action_dtype = _buffer_dtypes(env)
    try:
        return ReplayBuffer(cfg["buffer"]["size"], env.single_observation_space.shape, env.single_action_space.shape,
                            obs_dtype=obs_dtype, action_dtype=action_dtype, seed=seed)
    except MemoryError as exc:  # the address space a lazily filled buffer reserves: more than the kernel allows
        raise ConfigError(f"config key 'buffer.size' is {cfg['buffer']['size']}: the replay buffer cannot be "
                          f"allocated ({exc}); lower buffer.size") from exc


def max_episode_steps(cfg: Mapping[str, Any]) -> Optional[int]:
    """The environment's time limit (``env.kwargs.max_episode_steps`` or its registered spec), if any."""
    from rlearn.env.vector_env import resolve_env_spec

    env_cfg = cfg["env"]
    limit = env_cfg["kwargs"].get("max_episode_steps")
    if limit is None:
        limit = resolve_env_spec(env_cfg["id"]).max_episode_steps
    return int(limit) if isinstance(limit, int) and limit > 0 else None


def episode_window(cfg: Mapping[str, Any], iters_per_envstep: float, max_episode_steps: Optional[int]) -> int:
    """Default window (in train iterations) of the episode keys: about :data:`EPISODES_PER_WINDOW` full-length
    episodes (TD3 on Pendulum logs every 100 iterations, its episodes take 200), at least ``monitor_window``."""
    learner = cfg["learner"]
    base = learner["monitor_window"] or learner["log_freq"]
    length = max_episode_steps or DEFAULT_EPISODE_STEPS
    return max(int(base), int(math.ceil(EPISODES_PER_WINDOW * length * iters_per_envstep)))


def make_learner(cfg: Mapping[str, Any], policy: Any, needs: PolicyNeeds, work_dir: Path, logger: logging.Logger,
                 rank: int, world_size: int) -> Any:
    """The learner, with the episode keys declared and their windows widened (unless configured)."""
    from rlearn.learner import BaseLearner

    learner_cfg = copy.deepcopy(cfg["learner"])
    if needs.on_policy:
        iters_per_envstep = 1.0 / (needs.rollout_steps * cfg["env"]["num_envs"])
    else:
        iters_per_envstep = float(cfg["train"]["updates_per_step"])
    window = episode_window(cfg, iters_per_envstep, max_episode_steps(cfg))
    for key in EPISODE_KEYS:
        learner_cfg["monitor_windows"].setdefault(key, window)
    try:
        learner = BaseLearner(policy, learner_cfg, work_dir=work_dir, logger=logger, rank=rank, world_size=world_size)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"learner: {error_message(exc)}") from exc
    learner.run_config = copy.deepcopy(dict(cfg))
    learner.declare_monitor_vars(list(EPISODE_KEYS))
    return learner


def add_default_hooks(learner: Any, cfg: Mapping[str, Any], evaluator: Any) -> Any:
    """Register a Timer-, LogShow-, Checkpoint- and EvalHook from the config, each unless ``learner.hooks`` holds
    one; returns the EvalHook in use (given ``evaluator`` if it has none)."""
    from rlearn.hooks import CheckpointHook, EvalHook, LogShowHook, TimerHook

    present = {type(hook) for hook in learner.hooks}
    if TimerHook not in present:
        learner.register_hook(TimerHook())
    if LogShowHook not in present:
        learner.register_hook(LogShowHook(freq=cfg["learner"]["log_freq"]))
    if CheckpointHook not in present:
        learner.register_hook(CheckpointHook(freq=cfg["checkpoint"]["freq"], keep=cfg["checkpoint"]["keep"]))
    eval_cfg = cfg["eval"]
    if EvalHook not in present:
        learner.register_hook(EvalHook(evaluator, freq=eval_cfg["freq"], stop_value=eval_cfg["stop_value"],
                                       patience=eval_cfg["patience"], save_best=eval_cfg["save_best"],
                                       video=eval_cfg["video"], video_freq=eval_cfg["video_freq"]))
    hook = learner.get_hook(EvalHook)
    if hook.evaluator is None:
        hook.evaluator = evaluator
    if hook.video and hook.recorder is None:  # its own rgb_array environment
        from rlearn.video import VideoRecorder, VideoUnavailable

        try:
            hook.recorder = VideoRecorder(cfg["env"]["id"], learner.policy, cfg["env"]["kwargs"],
                                          seed=derived_seed(cfg["seed"], 3))
        except VideoUnavailable as exc:
            raise ConfigError(f"eval.video=True: {exc}") from exc
    return hook
