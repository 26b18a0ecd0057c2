"""Learn-step cost of every bundled algorithm and of the monitor, this tree against another revision.

For TD3, SAC, DQN (batches from a filled ``ReplayBuffer``), PPO and PPG (one collected rollout, learned again
and again) one iteration is ``BaseLearner.train(data)`` with a ``LogShowHook`` every 10 iterations and no writer:
the policy's update, the named info dict, the metric store and a log's statistics. The monitor row is one
iteration of 12 keys (8 every iteration, 2 every 2nd, 2 every 10th) into ``learner.record`` plus a log every
20 ticks. Each side runs in its own process on one torch thread (``PYTHONPATH`` = its tree); the sides
alternate round by round so that both see the same machine load, and the ratio of each round's pair is reported
with the load average.

    .venv/bin/python benchmarks/compare_revisions.py --old ad9f519            # 3 rounds, all algorithms
    .venv/bin/python benchmarks/compare_revisions.py --old HEAD~5 --algos td3 monitor --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_td3 import checkout_of  # noqa: E402 - a temporary git worktree of a revision
ALGOS = ("td3", "sac", "dqn", "ppo", "ppg", "monitor")
CONFIGS = {"td3": "td3_pendulum", "sac": "sac_pendulum", "dqn": "dqn_cartpole", "ppo": "ppo_pendulum",
           "ppg": "ppg_pendulum"}


def _iteration(algo: str) -> Any:
    """``(learner, next_data)`` for one algorithm, built with the public API of the tree on ``sys.path``."""
    import importlib

    import numpy as np
    import torch

    from policies import get_policy_class
    from rlearn.collect import Collector
    from rlearn.env import make_vector_env
    from rlearn.hooks.log_show import LogShowHook
    from rlearn.learner import BaseLearner

    torch.manual_seed(0)
    if algo == "monitor":
        policy = get_policy_class("dqn")({}, *_spaces("CartPole-v1"), seed=0)
        learner = BaseLearner(policy, {"log_freq": 20}, writers=[])
        keys = [f"loss/{i}" for i in range(12)]
        learner.declare_monitor_vars(keys)
        learner.register_hook(LogShowHook(freq=20))
        learner.policy._forward_learn = lambda data: {k: 0.5 * i for i, k in enumerate(keys)
                                                      if i < 8 or (i < 10 and data % 2 == 0) or data % 10 == 0}
        counter = iter(range(10**9))
        return learner, lambda: next(counter)
    cfg = importlib.import_module(f"rlearn.configs.{CONFIGS[algo]}").config
    policy_cfg = {k: v for k, v in cfg["policy"].items() if k != "type"}
    if "learn_threads" in policy_cfg:  # one thread, as everything else here: two are noise on a shared machine
        policy_cfg["learn_threads"] = 1
    env = make_vector_env(cfg["env"]["id"], cfg["env"].get("num_envs", 1), seed=0)
    policy = get_policy_class(cfg["policy"]["type"])(policy_cfg, env.single_observation_space,
                                                     env.single_action_space, seed=0)
    learner = BaseLearner(policy, {"log_freq": 10}, writers=[])
    learner.register_hook(LogShowHook(freq=10))
    collector = Collector(env, policy, seed=0)
    if algo in ("ppo", "ppg"):
        from rlearn.buffer import rollout_to_tensors

        rollout = rollout_to_tensors(collector.collect(policy.cfg["rollout_steps"]))
        return learner, lambda: rollout
    from rlearn.buffer import ReplayBuffer

    discrete = algo == "dqn"
    buffer = ReplayBuffer(20_000, env.single_observation_space.shape, () if discrete else env.single_action_space.shape,
                          action_dtype=np.int64 if discrete else np.float32, seed=0)
    while len(buffer) < 2_000:
        buffer.add(collector.collect(100).transitions)
    batch = policy.cfg["batch_size"]
    return learner, lambda: buffer.sample(batch)


def _spaces(env_id: str) -> Any:
    import gymnasium as gym

    env = gym.make(env_id)
    return env.observation_space, env.action_space


def worker(algo: str, iters: int) -> Dict[str, Any]:
    """Seconds per iteration (median of 5 blocks of ``iters``) in this process."""
    import torch

    torch.set_num_threads(1)
    learner, data = _iteration(algo)
    for _ in range(max(5, iters // 5)):  # warm-up
        learner.train(data())
    blocks = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iters):
            learner.train(data())
        blocks.append((time.perf_counter() - start) / iters)
    return {"s_per_iter": statistics.median(blocks)}


def run_side(tree: Path, algo: str, iters: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--worker", algo, "--iters", str(iters)], env=env, cwd=tree,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["s_per_iter"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="HEAD", help="the revision to compare this tree with")
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=ALGOS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=0, help="iterations per timed block (default: per algorithm)")
    parser.add_argument("--worker", choices=ALGOS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    default_iters = {"td3": 100, "sac": 60, "dqn": 200, "ppo": 2, "ppg": 2, "monitor": 2000}
    if args.worker:
        print(json.dumps(worker(args.worker, args.iters or default_iters[args.worker])))
        return 0
    rows: List[List[Any]] = []
    with checkout_of(args.old) as old_tree:
        for algo in args.algos:
            iters = args.iters or default_iters[algo]
            old, new, ratios = [], [], []
            for round_ in range(args.rounds):
                sides = [("old", old_tree), ("new", HERE.parent)]
                pair = {}
                for label, tree in sides if round_ % 2 == 0 else sides[::-1]:
                    pair[label] = run_side(tree, algo, iters)
                old.append(pair["old"])
                new.append(pair["new"])
                ratios.append(pair["old"] / pair["new"])
            rows.append([algo, f"{statistics.median(old) * 1e3:.3f}", f"{statistics.median(new) * 1e3:.3f}",
                         f"{statistics.median(ratios):.3f}", " ".join(f"{r:.2f}" for r in ratios),
                         " ".join(f"{x:.1f}" for x in os.getloadavg())])
            print(" | ".join(map(str, rows[-1])), flush=True)
    print(f"\nold = {args.old}, new = this tree; ms per iteration (median), ratio = old / new (> 1: faster now)")
    print("| algorithm | old ms | new ms | ratio | per round | load (1/5/15 min) |\n|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
