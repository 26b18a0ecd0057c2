"""Shared parts of the PPO-family benchmarks (``bench_ppo.py``, ``bench_ppg.py``): Stable-Baselines3's PPO run
and evaluated the way rlearn's runs are, and the per-run summary both scripts report.

Not a benchmark itself. ``run_sb3_ppo`` trains SB3 PPO with rl-zoo-style settings, evaluates its deterministic
policy every ``eval_freq`` env steps on ``EVAL_EPISODES`` sub-environments (evaluation time excluded from the
training time, as in rlearn's runs) and splits the training time into rollout collection and update.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

EVAL_EPISODES = 10

#: rl-zoo's PPO hyperparameters (rl-baselines3-zoo hyperparams/ppo.yml); ``decay``: lr and clip range fall
#: linearly to 0 (rl-zoo's ``lin_1e-3`` / ``lin_0.2``). Pendulum runs without rl-zoo's gSDE (rlearn has none).
SB3_PPO_SETTINGS = {
    "cartpole": dict(n_envs=8, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8,
                     ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, decay=True),
    "pendulum": dict(n_envs=4, n_steps=1024, batch_size=64, n_epochs=10, gamma=0.9, gae_lambda=0.95,
                     ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, decay=False),
}


def evaluate_sb3(model: Any, env: Any, seed: int) -> float:
    """Mean return of the first episode of each of ``env``'s sub-environments (deterministic actions)."""
    obs, _ = env.reset(seed=seed)
    returns = np.zeros(env.num_envs)
    alive = np.ones(env.num_envs, dtype=bool)
    while alive.any():
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action)
        returns += reward * alive
        alive &= ~(terminated | truncated)
    return float(returns.mean())


def run_sb3_ppo(library: str, env_key: str, env_id: str, hp: Mapping[str, Any], seed: int, steps: int,
                eval_freq: int, target: float, threads: int = 1) -> Dict[str, Any]:
    """Train SB3 PPO on ``env_id`` with the settings ``hp`` (see :data:`SB3_PPO_SETTINGS`) for ``steps`` env
    steps on ``threads`` torch threads, evaluating every ``eval_freq`` env steps and at the end; returns
    :func:`summarise`'s dict with the breakdown ``rollout`` / ``update`` (seconds)."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    clock = time.perf_counter
    eval_env = gym.make_vec(env_id, num_envs=EVAL_EPISODES, vectorization_mode="sync")

    class EvalAndTime(BaseCallback):
        """Evaluates on schedule and keeps the evaluation time out of the training and rollout times."""

        def __init__(self) -> None:
            super().__init__()
            self.next_eval = eval_freq
            self.evaluate = self.rollout = self.start = self._rollout_start = self._eval_in_rollout = 0.0
            self.points: List[Dict[str, float]] = []

        def _on_training_start(self) -> None:
            self.start = clock()

        def _on_rollout_start(self) -> None:
            self._rollout_start = clock()
            self._eval_in_rollout = 0.0

        def _on_rollout_end(self) -> None:
            self.rollout += clock() - self._rollout_start - self._eval_in_rollout

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_eval:
                self.next_eval += eval_freq
                begin = clock()
                ret = evaluate_sb3(self.model, eval_env, seed=10_000 * (seed + 1) + self.num_timesteps)
                elapsed = clock() - begin
                self.evaluate += elapsed
                self._eval_in_rollout += elapsed
                self.points.append(dict(envstep=self.num_timesteps, train_time=clock() - self.start - self.evaluate,
                                        eval_return=ret))
            return True

    torch.set_num_threads(threads)
    env = make_vec_env(env_id, n_envs=hp["n_envs"], seed=seed)
    lr, clip = hp["learning_rate"], hp["clip_range"]
    model = PPO("MlpPolicy", env, n_steps=hp["n_steps"], batch_size=hp["batch_size"], n_epochs=hp["n_epochs"],
                gamma=hp["gamma"], gae_lambda=hp["gae_lambda"], ent_coef=hp["ent_coef"],
                learning_rate=(lambda progress: progress * lr) if hp["decay"] else lr,
                clip_range=(lambda progress: progress * clip) if hp["decay"] else clip,
                use_sde=False, seed=seed, device="cpu", verbose=0)
    bench = EvalAndTime()
    model.learn(steps, callback=bench)
    train_time = clock() - bench.start - bench.evaluate
    if not bench.points or bench.points[-1]["envstep"] != model.num_timesteps:  # a final evaluation, like the runs
        ret = evaluate_sb3(model, eval_env, seed=10_000 * (seed + 1) + model.num_timesteps)
        bench.points.append(dict(envstep=model.num_timesteps, train_time=train_time, eval_return=ret))
    eval_env.close()
    env.close()
    breakdown = {"rollout": bench.rollout, "update": train_time - bench.rollout}
    return summarise(library, env_key, seed, model.num_timesteps, train_time, bench.points, breakdown, target)


def summarise(library: str, env_key: str, seed: int, envsteps: int, train_time: float, points: List[Dict[str, float]],
              breakdown: Dict[str, float], target: float) -> Dict[str, Any]:
    """One run's summary: env steps/s, the first evaluation at or above ``target`` (steps and training seconds),
    the first evaluation from which every later one stays there, the final return, the time breakdown."""
    hit = next((p for p in points if p["eval_return"] >= target), None)
    stable = None
    for p in reversed(points):
        if p["eval_return"] < target:
            break
        stable = p
    return dict(
        library=library, env=env_key, seed=seed, envsteps=envsteps, train_time=train_time,
        env_steps_per_s=envsteps / train_time, final_return=points[-1]["eval_return"] if points else float("nan"),
        steps_to_target=hit["envstep"] if hit else None, time_to_target=hit["train_time"] if hit else None,
        stable_from_steps=stable["envstep"] if stable else None, stable_from_time=stable["train_time"] if stable else None,
        breakdown=breakdown, points=points,
    )


def write_csv(path: Path, runs: List[Dict[str, Any]]) -> None:
    """One row per evaluation of every run: library, env, seed, envstep, training seconds, mean return."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["library", "env", "seed", "envstep", "train_time_s", "eval_return_mean"])
        for run in runs:
            for p in run["points"]:
                writer.writerow([run["library"], run["env"], run["seed"], p["envstep"], f"{p['train_time']:.3f}",
                                 f"{p['eval_return']:.2f}"])


def fmt(value: Optional[float], spec: str) -> str:
    """``format(value, spec)``, or ``-`` for None."""
    return "-" if value is None else format(value, spec)
