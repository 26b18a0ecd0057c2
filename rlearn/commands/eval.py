"""``rlearn eval CKPT_OR_WORK_DIR``: play a trained policy deterministically and print its returns, rebuilt from
the checkpoint's config by :mod:`rlearn.run.build` (code it imports only with ``--allow-imports``). Exit codes: 0,
or 2 with one line on stderr for any mistake. See docs/evaluation.md."""

from __future__ import annotations

import argparse
import contextlib
import copy
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from rlearn.commands import fail, int_at_least

HELP = "play a trained policy deterministically (a checkpoint or a work dir) and print its returns"

EPILOG = """\
examples:
  rlearn eval work_dirs/td3_pendulum                     # ckpt/best.pt, else ckpt/latest.pt
  rlearn eval work_dirs/td3_pendulum/ckpt/latest.pt --episodes 20 --seed 7
  rlearn eval work_dirs/ppg_cartpole --video cartpole.mp4   # needs: pip install 'rlearn[video]'
  rlearn eval work_dirs/custom_policy --allow-imports     # a run whose config imports your own files
"""


class EvalCommandError(Exception):
    """A mistake reported as one line and exit code 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``rlearn eval`` (no heavy imports here)."""
    parser.add_argument("target", metavar="CKPT_OR_WORK_DIR",
                        help="a checkpoint file, or a run's work dir (its ckpt/best.pt, else ckpt/latest.pt)")
    parser.add_argument("--episodes", type=int_at_least(1), default=None, metavar="N",
                        help="episodes to play (default: the run's eval.episodes)")
    parser.add_argument("--seed", type=int_at_least(0), default=None, metavar="S",
                        help="seed of the episodes (default: the seed the run's evaluations started from)")
    parser.add_argument("--video", default=None, metavar="OUT.mp4",
                        help="also record one episode as an MP4 (needs: pip install 'rlearn[video]')")
    parser.add_argument("--device", default="cpu", metavar="DEV",
                        help="torch device of the policy: cpu (default), cuda, cuda:1, or auto")
    parser.add_argument("--allow-imports", action="store_true",
                        help="import the modules and files the checkpoint's config names (custom_imports, an "
                             "import path as policy.type or env.id): runs their code, so only for a checkpoint "
                             "you trust. Without it such a checkpoint is refused")


def find_checkpoint(target: Path) -> Tuple[Path, str]:
    """The checkpoint ``target`` names and why: a file as given; a work dir's (or ckpt folder's) ``best.pt``, else
    ``latest.pt``."""
    if target.is_file():
        return target, "as given"
    if not target.exists():
        raise EvalCommandError(f"{target}: no such file or directory")
    for folder in (target / "ckpt", target):
        for name, why in (("best.pt", "the best evaluation"), ("latest.pt", "the latest checkpoint; no best.pt")):
            if (folder / name).is_file():
                return folder / name, why
    raise EvalCommandError(f"{target}: no checkpoint in it (looked for ckpt/best.pt and ckpt/latest.pt)")


def evaluate_checkpoint(path: Path, episodes: Optional[int] = None, seed: Optional[int] = None,
                        video: Optional[Path] = None, device: str = "cpu",
                        allow_imports: bool = False) -> Dict[str, Any]:
    """Rebuild the env and policy of checkpoint ``path`` (code it imports only with ``allow_imports``) and play
    ``episodes`` deterministic episodes: ``{"result", "episodes", "seed", "checkpoint", "config", "video"}``;
    :class:`EvalCommandError` for every user-facing problem."""
    import torch

    from rlearn.checkpoint import CheckpointError, read_checkpoint
    from rlearn.checkpoint.fit import check_policy_state
    from rlearn.collect import Evaluator
    from rlearn.config import ConfigError, imports_named, resolve_config
    from rlearn.run import build
    from rlearn.run.ranks import derived_seed

    try:
        # only what playing the policy needs: a damaged entry elsewhere (the replay buffer) cannot stop it
        checkpoint = read_checkpoint(path, sections=("policy_class", "policy", "config", "eval_progress"))
    except CheckpointError as exc:
        raise EvalCommandError(str(exc)) from exc
    saved = checkpoint.get("config")
    if not isinstance(saved, dict):
        raise EvalCommandError(f"checkpoint {path}: holds no run config (it was not written by `rlearn train` / "
                               "rlearn.run.train), so the environment and policy cannot be rebuilt")
    named = imports_named(saved)
    if named and not allow_imports:
        raise EvalCommandError(
            f"checkpoint {path}: its config imports code ({'; '.join(named)}), and opening a checkpoint runs no "
            "code from it by default; if you trust this checkpoint and those files, pass --allow-imports")
    try:
        cfg = resolve_config(copy.deepcopy(saved))
    except ConfigError as exc:
        raise EvalCommandError(f"checkpoint {path}: its config no longer resolves: {exc}") from exc
    if video is not None:
        from rlearn.video import VideoUnavailable, require_video_support

        try:
            require_video_support(cfg["env"]["id"])
        except VideoUnavailable as exc:
            raise EvalCommandError(f"--video: {exc}") from exc
    seed = derived_seed(cfg["seed"], 2) if seed is None else seed  # the run's evaluations started here
    episodes = cfg["eval"]["episodes"] if episodes is None else episodes
    one_env = copy.deepcopy(cfg)
    one_env["env"]["num_envs"] = 1  # the training env make_envs also builds is closed at once
    env = eval_env = None
    try:
        try:
            device = build.resolve_device(device)
            env, eval_env = build.make_envs(one_env, cfg["seed"])
            env.close()
            policy = build.make_policy(cfg, eval_env, device, cfg["seed"])
        except ConfigError as exc:
            raise EvalCommandError(f"checkpoint {path}: {exc}") from exc
        if type(policy).__qualname__ != checkpoint["policy_class"]:
            raise EvalCommandError(f"checkpoint {path}: holds a {checkpoint['policy_class']} policy but its config "
                                   f"builds {type(policy).__qualname__}")
        try:  # the networks are all that playing needs: the optimizers' state is neither checked nor loaded
            check_policy_state(path, policy, checkpoint["policy"], networks_only=True)
        except CheckpointError as exc:
            raise EvalCommandError(str(exc)) from exc
        try:
            for name, network in policy.modules().items():
                network.load_state_dict(checkpoint["policy"]["modules"][name])
        except Exception as exc:
            raise EvalCommandError(f"checkpoint {path}: cannot load the policy ({type(exc).__name__}: {exc})") from exc
        evaluator = Evaluator(eval_env, policy, episodes, seed=seed)
        with torch.no_grad():
            result = evaluator.evaluate()
            clip = None
            if video is not None:
                from rlearn.video import VideoRecorder

                recorder = VideoRecorder(cfg["env"]["id"], policy, cfg["env"]["kwargs"], seed=seed)
                with contextlib.closing(recorder):
                    clip = recorder.record(video)
    finally:
        if eval_env is not None:
            eval_env.close()
    return {"result": result, "episodes": evaluator.episodes, "seed": seed, "checkpoint": checkpoint,
            "config": cfg, "video": clip}


def run(args: argparse.Namespace) -> int:
    """Evaluate and print; returns 0, or 2 with one line on stderr."""
    from rlearn.hooks.log_show import format_value

    try:
        path, why = find_checkpoint(Path(args.target))
        print(f"checkpoint: {path} ({why})", flush=True)
        out = evaluate_checkpoint(path, episodes=args.episodes, seed=args.seed,
                                  video=None if args.video is None else Path(args.video), device=args.device,
                                  allow_imports=args.allow_imports)
    except EvalCommandError as exc:
        return fail("eval", exc)
    checkpoint, cfg, result = out["checkpoint"], out["config"], out["result"]
    progress = checkpoint.get("eval_progress") or {}
    if progress.get("best_return") is not None:
        print(f"  best evaluation of the run: return {format_value(progress['best_return'])} at envstep "
              f"{progress['best_envstep']}")
    print(f"policy: {checkpoint['policy_class']} on {cfg['env']['id']}, trained for train_iter "
          f"{checkpoint['train_iter']}, envstep {checkpoint['envstep']}")
    print(f"{result['episodes']} episodes, deterministic policy, seed {out['seed']}:")
    print(f"  episode_return: mean {format_value(result['episode_return_mean'])}  std "
          f"{format_value(result['episode_return_std'])}  min {format_value(result['episode_return_min'])}  max "
          f"{format_value(result['episode_return_max'])}")
    print(f"  episode_length: mean {format_value(result['episode_length_mean'])}")
    clip = out["video"]
    if clip is not None:
        print(f"video: {clip.path} ({clip.frames} frames of {clip.size[1]}x{clip.size[0]}; episode return "
              f"{format_value(clip.episode_return)}, {clip.length} steps)")
    return 0
