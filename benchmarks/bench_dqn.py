"""DQN on CartPole-v1: rlearn's ``dqn_cartpole`` side by side with Stable-Baselines3's DQN, same rl-zoo settings.

For every seed, one full training run per library in a fresh process, the two libraries alternating (rlearn
first on even seeds, SB3 first on odd ones, so both see the same machine load on average). Both train with
rl-baselines3-zoo's DQN CartPole-v1 hyperparameters -- [256, 256], lr 2.3e-3, batch 64, buffer 100,000,
learning_starts 1,000, gamma 0.99, 256 env steps then 128 gradient steps, epsilon 1 -> 0.04 over 8,000 env
steps, target sync once per training phase (SB3: every 10 env steps; rlearn: every 128 iterations, the same
thing), Huber loss, gradient norm clipped at 10 -- for 50,000 env steps, with one torch thread each
(``--threads N``: N each).

Every ``--eval-freq`` env steps the greedy policy plays 10 episodes (rlearn: the pipeline's own evaluation;
SB3: rlearn's ``Evaluator`` on the same kind of 10-env vector, through a ``predict`` adapter). The time spent
evaluating is left out of both libraries' timings, so:

* **env steps/s** = env steps / training seconds (construction, collection, learning, logging, checkpoints);
  the ratio rlearn / SB3 per seed (paired runs) and its median;
* **time to target** = training seconds until the first evaluation with mean return >= 475 (and its env step);
* **final return** = the evaluation at the end of the 50k steps, per seed.

Writes ``benchmarks/results/dqn_cartpole_learning.csv`` (one row per evaluation) and ``.png`` (learning curves,
drawn by ``rlearn plot`` through ``benchmarks/curves.py``),
and ``dqn_bench.json`` (the summary, with the machine's load average).

    .venv/bin/python benchmarks/bench_dqn.py                   # 3 seeds x 2 libraries x 50k steps
    .venv/bin/python benchmarks/bench_dqn.py --seeds 0 --steps 20000 --suffix _quick

SB3 comes with the ``bench`` extra (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from curves import plot_learning_curves, write_reference_run  # noqa: E402

RESULTS = HERE / "results"
TARGET = 475.0
EVAL_EPISODES = 10

#: rl-zoo's DQN CartPole-v1 hyperparameters (hyperparams/dqn.yml), as SB3 names them
SB3_SETTINGS = dict(
    learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
    exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]),
)


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


class _Curve:
    """Evaluation points ``(envstep, return, training seconds so far)``; evaluation time is not training time."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.eval_seconds = 0.0
        self.points: List[Dict[str, float]] = []

    def train_seconds(self) -> float:
        return time.perf_counter() - self.start - self.eval_seconds

    def record(self, envstep: int, evaluate: Any) -> Dict[str, float]:
        at = self.train_seconds()
        begin = time.perf_counter()
        result = evaluate()
        self.eval_seconds += time.perf_counter() - begin
        self.points.append(dict(envstep=int(envstep), return_mean=float(result["episode_return_mean"]), train_seconds=at))
        return result


def _summary(curve: _Curve, steps: int) -> Dict[str, Any]:
    hit = next((p for p in curve.points if p["return_mean"] >= TARGET), None)
    train_seconds = curve.train_seconds()
    return dict(
        steps=steps, train_seconds=train_seconds, env_steps_per_s=steps / train_seconds,
        final_return=curve.points[-1]["return_mean"] if curve.points else None,
        target_envstep=hit["envstep"] if hit else None, target_seconds=hit["train_seconds"] if hit else None,
        curve=curve.points,
    )


# ------------------------------------------------------------------------------------------ workers
def worker_rlearn(seed: int, steps: int, eval_freq: int, threads: int = 1, work_dir: str = "") -> Dict[str, Any]:
    """Train ``dqn_cartpole`` through the pipeline (log table, TensorBoard, checkpoints) on ``threads`` torch
    threads, evaluating every ``eval_freq`` env steps and at the end. ``work_dir``: where the run writes (kept
    for ``rlearn plot``); empty: a temporary directory."""
    import torch

    from rlearn.config import load_config
    from rlearn.run import Trainer

    torch.set_num_threads(threads)
    cfg = load_config("dqn_cartpole", overrides=[f"seed={seed}", f"num_threads={threads}",
                                                 f"train.max_env_steps={steps}", f"eval.freq={eval_freq}",
                                                 f"eval.episodes={EVAL_EPISODES}"])
    with tempfile.TemporaryDirectory(prefix="bench_dqn_") as tmp:
        curve = _Curve()
        pipeline = Trainer(cfg, work_dir=Path(work_dir or Path(tmp) / "run"), progress=False)
        evaluate = pipeline.evaluator.evaluate
        pipeline.evaluator.evaluate = lambda: curve.record(pipeline.envstep, evaluate)  # time it, out of training
        result = pipeline.run()
        out = _summary(curve, result.envstep)
    out["train_iter"] = result.train_iter
    return out


class _SB3Greedy:
    """SB3's model behind rlearn's ``_forward_eval`` contract, so both libraries are evaluated the same way."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        return self.model.predict(obs, deterministic=True)[0]


def worker_sb3(seed: int, steps: int, eval_freq: int, threads: int = 1, work_dir: str = "") -> Dict[str, Any]:
    """Train SB3 DQN with the same settings on ``threads`` torch threads, evaluating every ``eval_freq`` env
    steps and at the end (``work_dir`` is unused: its curve is written by the main process)."""
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    from rlearn.collect import Evaluator
    from rlearn.env import make_vector_env

    torch.set_num_threads(threads)
    eval_env = make_vector_env("CartPole-v1", EVAL_EPISODES, seed=10_000 + seed)
    curve = _Curve()

    class EvalEvery(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.evaluator: Optional[Evaluator] = None
            self.last = 0

        def _on_step(self) -> bool:
            if self.num_timesteps // eval_freq > self.last // eval_freq:
                self.last = self.num_timesteps
                curve.record(self.num_timesteps, self._evaluator().evaluate)
            return True

        def _evaluator(self) -> Evaluator:
            if self.evaluator is None:
                self.evaluator = Evaluator(eval_env, _SB3Greedy(self.model), EVAL_EPISODES, seed=20_000 + seed)
            return self.evaluator

    callback = EvalEvery()
    model = DQN("MlpPolicy", "CartPole-v1", seed=seed, device="cpu", verbose=0, **SB3_SETTINGS)
    model.learn(total_timesteps=steps, callback=callback)
    curve.record(model.num_timesteps, callback._evaluator().evaluate)  # the final evaluation
    eval_env.close()
    return _summary(curve, int(model.num_timesteps))


WORKERS = {"rlearn": worker_rlearn, "sb3": worker_sb3}


def run_worker(kind: str, **kwargs: Any) -> Dict[str, Any]:
    """One training run in a fresh Python process (no shared caches or threads between runs)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--worker-args", json.dumps(kwargs)]
    env = dict(os.environ, RLEARN_NO_PROGRESS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -------------------------------------------------------------------------------------------- report
def write_curves(runs: List[Dict[str, Any]], out: Path, suffix: str, runs_root: Path) -> None:
    """The CSV (one row per evaluation) and the PNG, drawn by ``rlearn plot`` from the rlearn runs' work dirs and
    the SB3 runs written as reference work dirs (:mod:`curves`)."""
    csv_path = out / f"dqn_cartpole_learning{suffix}.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["library", "seed", "envstep", "return_mean", "train_seconds"])
        for run in runs:
            for p in run["curve"]:
                writer.writerow([run["library"], run["seed"], p["envstep"], p["return_mean"], f"{p['train_seconds']:.3f}"])
    dirs = []
    for run in runs:
        if run["library"] == "rlearn":
            dirs.append(runs_root / f"rlearn_s{run['seed']}")
        else:
            dirs.append(write_reference_run(runs_root / f"sb3_s{run['seed']}", "sb3_dqn_cartpole", run["seed"],
                                            [(p["envstep"], p["return_mean"]) for p in run["curve"]],
                                            times=[p["train_seconds"] for p in run["curve"]]))
    plot_learning_curves(dirs, out / f"dqn_cartpole_learning{suffix}.png",
                         f"DQN CartPole-v1, rl-zoo settings: rlearn vs SB3 (load {_load()})")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--eval-freq", type=int, default=2_500)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--suffix", default="", help="appended to the result file names (e.g. _quick)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of both libraries (default 1: the same-CPU-time comparison)")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--worker-args", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(WORKERS[args.worker](**json.loads(args.worker_args))))
        return 0

    from tabulate import tabulate

    args.out.mkdir(parents=True, exist_ok=True)
    runs: List[Dict[str, Any]] = []
    loads = [_load()]
    runs_root = Path(tempfile.mkdtemp(prefix="bench_dqn_runs_"))  # work dirs for rlearn plot, deleted at the end
    for i, seed in enumerate(args.seeds):
        order = ["rlearn", "sb3"] if i % 2 == 0 else ["sb3", "rlearn"]
        for kind in order:
            run = run_worker(kind, seed=seed, steps=args.steps, eval_freq=args.eval_freq, threads=args.threads,
                             work_dir=str(runs_root / f"{kind}_s{seed}"))
            run.update(library=kind, seed=seed, load_after=_load())
            loads.append(run["load_after"])
            runs.append(run)
            print(f"{kind:6s} seed {seed}: {run['env_steps_per_s']:.0f} env steps/s, final return "
                  f"{run['final_return']}, target at {run['target_envstep']} env steps "
                  f"({run['target_seconds'] and round(run['target_seconds'], 1)} s); load {run['load_after']}", flush=True)

    by = {(r["library"], r["seed"]): r for r in runs}
    rows, ratios = [], []
    for seed in args.seeds:
        mine, theirs = by[("rlearn", seed)], by[("sb3", seed)]
        ratio = mine["env_steps_per_s"] / theirs["env_steps_per_s"]
        ratios.append(ratio)
        rows.append([seed, mine["env_steps_per_s"], theirs["env_steps_per_s"], ratio,
                     mine["target_envstep"], mine["target_seconds"], theirs["target_envstep"], theirs["target_seconds"],
                     mine["final_return"], theirs["final_return"]])
    headers = ["seed", "rlearn steps/s", "SB3 steps/s", "ratio", "rlearn target step", "rlearn target s",
               "SB3 target step", "SB3 target s", "rlearn final", "SB3 final"]
    print(tabulate(rows, headers=headers, floatfmt=".3g"))
    median = float(statistics.median(ratios))
    print(f"median env steps/s ratio rlearn / SB3: {median:.2f}x over {len(ratios)} paired runs; load averages {loads}")
    write_curves(runs, args.out, args.suffix, runs_root)
    shutil.rmtree(runs_root, ignore_errors=True)
    summary = dict(steps=args.steps, seeds=args.seeds, torch_threads=args.threads, median_ratio=median, ratios=ratios, loads=loads,
                   runs=[{k: v for k, v in r.items() if k != "curve"} for r in runs])
    (args.out / f"dqn_bench{args.suffix}.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
