"""What a 1M-step HalfCheetah-v5 run costs with rlearn's TD3 and SAC on this machine (the ``mujoco`` extra).

One process per algorithm, the standard MuJoCo settings ([256, 256] networks, batch 256, one gradient step
per env step). It times ``--iters`` train iterations on replay-shaped minibatches and ``--steps`` env steps
(acting with the policy plus ``env.step``), wall-clock and CPU time, and extrapolates a 1,000,000-step run:
``1e6 * (iteration + env step)`` (the first ``learning_starts`` steps have no iteration; logging,
evaluation and checkpoints add a few percent). With ``--threads`` the iterations use that many torch threads.

    .venv/bin/python benchmarks/bench_mujoco_cost.py                   # TD3 and SAC, one thread
    .venv/bin/python benchmarks/bench_mujoco_cost.py --threads 2

Prints one line per algorithm and writes ``benchmarks/results/mujoco_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
POLICIES = {"td3": "policies.td3:TD3Policy", "sac": "policies.sac:SACPolicy"}


def measure(algo: str, iters: int, steps: int, threads: int) -> Dict[str, Any]:
    import gymnasium as gym
    import torch

    from rlearn.registry import get_policy_class

    torch.set_num_threads(threads)
    env = gym.make("HalfCheetah-v5")
    policy = get_policy_class(algo)(dict(hidden_sizes=[256, 256], batch_size=256, learning_starts=0),
                                    env.observation_space, env.action_space, seed=0)
    gen = torch.Generator().manual_seed(0)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    batch = dict(obs=torch.randn(256, obs_dim, generator=gen), action=torch.rand(256, act_dim, generator=gen) * 2 - 1,
                 reward=torch.randn(256, generator=gen), next_obs=torch.randn(256, obs_dim, generator=gen),
                 terminated=torch.zeros(256))
    for _ in range(20):
        policy._forward_learn(batch)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(iters):
        policy._forward_learn(batch)
    iter_wall, iter_cpu = (time.perf_counter() - wall) / iters, (time.process_time() - cpu) / iters
    torch.set_num_threads(1)
    obs, _ = env.reset(seed=0)
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        out = policy._forward_collect(obs[None].astype(np.float32), 10**9)
        obs, _, terminated, truncated, _ = env.step(out["env_action"][0])
        if terminated or truncated:
            obs, _ = env.reset()
    step_wall, step_cpu = (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps
    return dict(algo=algo, threads=threads, iter_ms=iter_wall * 1e3, iter_cpu_ms=iter_cpu * 1e3,
                step_ms=step_wall * 1e3, step_cpu_ms=step_cpu * 1e3,
                hours_1m=1e6 * (iter_wall + step_wall) / 3600, cpu_hours_1m=1e6 * (iter_cpu + step_cpu) / 3600,
                env_steps_per_s=1.0 / (iter_wall + step_wall), load=" ".join(f"{x:.2f}" for x in os.getloadavg()))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", default=["td3", "sac"], choices=sorted(POLICIES))
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = []
    for algo in args.algos:
        row = measure(algo, args.iters, args.steps, args.threads)
        rows.append(row)
        print(f"{algo}: iteration {row['iter_ms']:.2f} ms ({row['iter_cpu_ms']:.2f} ms CPU), env step + acting "
              f"{row['step_ms']:.3f} ms -> {row['env_steps_per_s']:.1f} env steps/s; 1M steps: {row['hours_1m']:.2f} h "
              f"wall ({row['cpu_hours_1m']:.2f} h CPU), {row['threads']} thread(s); load {row['load']}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"mujoco_cost{'' if args.threads == 1 else f'_{args.threads}threads'}.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
