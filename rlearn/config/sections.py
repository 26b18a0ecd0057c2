"""Every framework config section, declared once as a dataclass of :func:`~rlearn.config.spec.option` keys and
nested :func:`~rlearn.config.spec.section` s. A section docstring's first line is its title in
docs/configuration.md, the rest follows its table; after adding a key, run ``python -m rlearn.config.docs``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from rlearn.config.spec import Check, non_empty, option, section
from rlearn.config.writer_specs import DEFAULT_WRITERS, check_writer_specs

__all__ = [
    "RunConfig", "EnvSection", "PolicySection", "BufferSection", "TrainSection", "LearnerSection",
    "LogProcessorSection", "EvalSection", "CheckpointSection", "DistSection",
]


# ------------------------------------------------------------------------------------------ checks
def _exp_name(v: str) -> Optional[str]:
    if not v or v.strip() != v or any(c in v for c in "/\\") or v in (".", "..") or not v.isprintable():
        return ("must be a non-empty name usable as a directory name (no '/', no surrounding spaces, no newline "
                "or other control character)")
    return None


def _str_list(v: list) -> Optional[str]:
    bad = [x for x in v if not isinstance(x, str) or not x]
    return f"must be a list of module names or file paths, got {bad[0]!r} in it" if bad else None


def _list_of_dicts(what: str, typed: bool = False) -> Check:
    """A check that every item is a dict (with a str ``type`` if ``typed``); ``what`` describes one."""
    def check(v: list) -> Optional[str]:
        bad = [i for i, item in enumerate(v) if not isinstance(item, Mapping)
               or (typed and not isinstance(item.get("type"), str))]
        return f"must be a list of {what}; item {bad[0]} is {v[bad[0]]!r}" if bad else None
    return check


def _writer_list(v: list) -> Optional[str]:
    names = [item.get("type") if isinstance(item, Mapping) else item for item in v]
    twice = next((name for name in names if names.count(name) > 1), None)
    problem = check_writer_specs(v)
    if problem is not None or twice is None:
        return problem
    where = [i for i, name in enumerate(names) if name == twice]
    return (f"lists the {twice!r} writer {len(where)} times (items {', '.join(map(str, where))}): every point "
            "would be written that many times; list each writer once")


def _dist_backend(v: str) -> Optional[str]:
    return None if v in ("gloo", "nccl") else "must be 'gloo', 'nccl' or None (nccl when CUDA is available, else gloo)"


# ---------------------------------------------------------------------------------------- sections
@dataclass
class EnvSection:
    """`env`: the training environments"""

    id: str = option(
        None, "a registered gymnasium id (`\"Pendulum-v1\"`, `\"CartPole-v1\"`); register your own with "
        "`rlearn.env.register_env` in a `custom_imports` module", check=non_empty)
    num_envs: int = option(1, "sub-environments stepped together as one vector env; `envstep` counts steps summed "
                           "over them", ge=1)
    asynchronous: bool = option(False, "one worker process per sub-environment (`AsyncVectorEnv`) instead of "
                                "stepping them in turn")
    kwargs: Dict[str, Any] = option({}, "keyword arguments for every sub-environment's constructor "
                                    "(`gymnasium.make(id, **kwargs)`), e.g. `{\"max_episode_steps\": 100}`")


@dataclass
class PolicySection:
    """`policy`: the algorithm

    | *others* | the policy's `Config` (or `default_config`) | as declared | every key the policy accepts, checked like a framework key; an unknown key is an error naming the policy, with the closest keys. The bundled policies' keys are listed below |

    The run also reads these policy keys: off-policy policies need `batch_size` (and may have
    `learning_starts`, default 0); on-policy policies need `rollout_steps`.
    """

    type: str = option(
        None, "a registered name (`\"td3\"`, `\"ppg\"`, `\"ppo\"`, `\"dqn\"`, `\"sac\"`, or one added with `@register_policy`), or an import path "
        "`\"package.module:ClassName\"`", check=non_empty)


@dataclass
class BufferSection:
    """`buffer`: the replay buffer (off-policy only)"""

    size: int = option(100_000, "transitions kept; the oldest are overwritten first. The filled part is saved in "
                       "every checkpoint. At start-up a full buffer must fit in the memory available and "
                       "`policy.batch_size` must not exceed it (a ConfigError otherwise)", ge=1)


@dataclass
class TrainSection:
    """`train`: how long, and how much learning per collected step

    On-policy policies collect `policy.rollout_steps` steps per environment and run one learner iteration
    per rollout; `collect_steps` and `updates_per_step` do not apply.
    """

    max_env_steps: int = option(100_000, "the run ends once this many env steps (summed over environments) are "
                                "collected", ge=1)
    collect_steps: int = option(1, "off-policy: steps per environment collected between two rounds of learner "
                                "iterations", ge=1)
    updates_per_step: float = option(
        1.0, "off-policy: learner iterations per collected env step once `envstep > policy.learning_starts` (as in SB3: the first `learning_starts` steps only fill the buffer). "
        "Fractions carry over (0.5 = one iteration every second env step)", gt=0, finite=True, expected="float > 0")


@dataclass
class LogProcessorSection:
    """`learner.log_processor`: which statistics the table and every writer show"""

    custom_cfg: List[dict] = option(
        [], "entries `dict(data_src=KEY, method_name=STAT, window_size=N, log_name=NAME)` (STAT: `mean`, `min`, "
        "`max`, `current`, `count`, `std` or one registered with `@HistoryBuffer.register_statistics`) choosing the statistics of a key (e.g. `episode_return` max over 100 episodes beside its "
        "mean); see [logging.md](logging.md). Only the shape is checked here; each entry is checked when the "
        "learner builds its `LogProcessor`", check=_list_of_dicts("dicts (e.g. dict(data_src='loss', method_name='max'))"))


@dataclass
class LearnerSection:
    """`learner`: the table, the windows, the hooks

    The run always adds a `TimerHook` (`data_time`, `train_time`), a `LogShowHook(freq=log_freq)`,
    a `CheckpointHook(freq=checkpoint.freq, keep=checkpoint.keep)` and an `EvalHook(freq=eval.freq,
    stop_value=eval.stop_value, patience=eval.patience, save_best=eval.save_best, video=eval.video,
    video_freq=eval.video_freq)`. A hook of the same type in `hooks` replaces the default one (so
    `hooks=[dict(type="LogShowHook", freq=10, width=100)]` configures the table).
    An LR scheduler is used only when you add an `LRSchedulerHook` here.

    A key of `monitor_windows` that neither the policy nor the run declares gets a warning naming the key
    and the declared keys (its window would never be used); with `strict=True` the run stops with that
    error before it writes its first event.

    **Episode windows.** Ended exploration episodes are recorded as `collector/episode_return` and
    `collector/episode_length`. Episodes end far less often than iterations (TD3 on Pendulum runs one
    iteration per env step and an episode lasts 200 steps), so with the default window of `log_freq`
    iterations most tables would show `-` for them, or an average over a single episode. Unless you set
    them in `monitor_windows`, their window is widened to hold about 10 full-length episodes:
    `max(monitor_window, ceil(10 * max_episode_steps * iterations_per_env_step))`, where
    `max_episode_steps` is the environment's time limit (1000 if it has none) and
    `iterations_per_env_step` is `updates_per_step` off-policy, `1 / (rollout_steps * num_envs)`
    on-policy. TD3 on Pendulum: 2000 iterations.
    """

    log_freq: int = option(100, "train iterations between two tables / TensorBoard points (see "
                           "[reading-the-logs.md](reading-the-logs.md)); the default `freq` of `LogShowHook`", ge=1)
    monitor_window: Optional[int] = option(None, "window of every monitored key, in train iterations",
                                           ge=1, same_as="log_freq", doc_default="None (= `log_freq`)")
    monitor_windows: Dict[str, int] = option(
        {}, "per-key windows, e.g. `{\"aux_value_loss\": 64}` for a key reported every 32 iterations",
        items=dict(ge=1))
    strict: bool = option(False, "an undeclared key returned by the policy is an error instead of a warning, and so "
                          "is a `monitor_windows` key that no declared key uses")
    hooks: List[dict] = option(
        [], "extra hooks as dicts, e.g. `dict(type=\"LRSchedulerHook\", scheduler=dict(type=\"StepLR\", "
        "step_size=1000, gamma=0.5), warmup=\"linear\", warmup_iters=500)`; see [hooks.md](hooks.md)",
        check=_list_of_dicts("hook dicts with a 'type' (e.g. dict(type='LogShowHook', freq=100))", typed=True))
    writers: List[Any] = option(
        list(DEFAULT_WRITERS), "where every logged number goes: `\"table\"` (the log), "
        "`\"tensorboard\"` (`tb/`), `\"jsonl\"` (`metrics.jsonl`), `\"csv\"` (`metrics.csv`), `\"wandb\"`, "
        "`\"mlflow\"` (optional extras); an item may be a dict with options, e.g. `dict(type=\"wandb\", "
        "project=\"pendulum\", mode=\"offline\")`. See [writers.md](writers.md)", check=_writer_list)
    log_processor: LogProcessorSection = section(LogProcessorSection)


@dataclass
class EvalSection:
    """`eval`: evaluation

    Results go to the log (a line and a table), TensorBoard (`evaluator_step/<k>` at step = envstep,
    `evaluator_iter/<k>` at step = train_iter, for `episode_return_mean`, `_std`, `_min`, `_max` and
    `episode_length_mean`) and the progress bar; every episode's return and length go to
    `<work_dir>/evaluations.jsonl`. See [evaluation.md](evaluation.md) for the best checkpoint, early
    stopping and videos.
    """

    freq: Optional[int] = option(10_000, "evaluate every time `envstep` passes a multiple of `freq` (and always at "
                                 "the end); None: only at the end", ge=1)
    episodes: int = option(10, "complete episodes per evaluation, with the deterministic policy (`_forward_eval`)",
                           ge=1)
    num_envs: int = option(1, "evaluation environments (separate from the training ones, seeded from `seed`)", ge=1)
    stop_value: Optional[float] = option(None, "end the run once the evaluation's mean return is `>= stop_value`",
                                         finite=True)
    patience: Optional[int] = option(
        None, "end the run after this many evaluations in a row without a new best mean return (stop reason "
        "`no_improvement`); None: never", ge=1)
    save_best: bool = option(True, "save `<work_dir>/ckpt/best.pt` (a full checkpoint) at every evaluation whose "
                             "mean return beats all earlier ones (a tie keeps the earlier)")
    video: bool = option(False, "record one evaluation episode as `<work_dir>/videos/envstep_<N>.mp4` (needs "
                         "`pip install 'rlearn[video]'`; see [evaluation.md](evaluation.md))")
    video_freq: Optional[int] = option(None, "with `video`: a video at the first evaluation after each new multiple "
                                       "of `video_freq` env steps; None: at every evaluation", ge=1)


@dataclass
class CheckpointSection:
    """`checkpoint`: saving

    See [checkpoints.md](checkpoints.md) for what a checkpoint holds and how resuming works.
    """

    freq: Optional[int] = option(10_000, "train iterations between two checkpoints; None: only at the end (and on "
                                 "Ctrl-C)", ge=1)
    keep: Optional[int] = option(3, "how many `iteration_<n>.pt` files to keep (the newest); None keeps all. "
                                 "`latest.pt` is always there", ge=1)


@dataclass
class DistSection:
    """`dist`: several processes

    Only used when the run is launched in several processes (`rlearn train CONFIG --nproc N` or `torchrun`);
    see [distributed.md](distributed.md).
    """

    backend: Optional[str] = option(None, "`torch.distributed` backend: `\"gloo\"` (CPU) or `\"nccl\"` (GPU); None "
                                    "picks nccl when CUDA is available, else gloo", check=_dist_backend,
                                    expected="'gloo' or 'nccl'")
    timeout_s: float = option(300.0, "seconds a collective waits for the other ranks before failing, so a rank that "
                              "hangs or dies stops the run instead of blocking it forever. Keep it above the "
                              "longest evaluation (rank 0 evaluates while the others wait)",
                              gt=0, finite=True, expected="float > 0")


@dataclass
class RunConfig:
    """Top-level keys"""

    exp_name: str = option(
        None, "names the run: the work dir `work_dirs/<exp_name>`, the log `<exp_name>.log` and the logger",
        check=_exp_name, doc_default="the config file's name (or the bundled config's name)")
    seed: int = option(0, "seeds Python's `random`, numpy, torch, the training environments (env `i` gets "
                       "`seed + i`), the evaluation environments (a seed derived from it), the replay buffer's "
                       "sampling and the policy", ge=0)
    device: str = option("cpu", "torch device of the networks (`\"cuda\"`, `\"cuda:1\"`, or `\"auto\"`: CUDA when "
                         "available)", check=non_empty)
    num_threads: Optional[int] = option(1, "`torch.set_num_threads` for the run, or None to leave torch's default. "
                                        "Small RL networks on CPU are usually fastest with one thread, and extra "
                                        "threads fight with environment workers", ge=1)
    profile: bool = option(False, "record a timeline trace into `<work_dir>/trace/` (also switched on by "
                           "`RLEARN_PROFILE=1`); see [timeline-traces.md](timeline-traces.md)")
    custom_imports: List[str] = option(
        [], "modules (`\"my_pkg.my_policies\"`) or Python files (`\"path/to/file.py\"`) imported before "
        "`policy.type` is resolved: where your policies, hooks and environments get registered. When the policy "
        "class was defined in the config file itself (or in a script run as `__main__`), the resolved config "
        "lists that file here, so `<work_dir>/config.py` loads on its own", check=_str_list)
    env: EnvSection = section(EnvSection)
    policy: PolicySection = section(PolicySection)
    buffer: BufferSection = section(BufferSection)
    train: TrainSection = section(TrainSection)
    learner: LearnerSection = section(LearnerSection)
    eval: EvalSection = section(EvalSection)
    checkpoint: CheckpointSection = section(CheckpointSection)
    dist: DistSection = section(DistSection)
