"""The off-policy run loop's own cost, without the policy's: per env step of collection and per learner iteration.

Builds the ``dqn_cartpole`` run (or ``--config NAME``) with :class:`rlearn.run.Trainer` and measures, in CPU
time of this process (``time.process_time``, one torch thread):

* **collect**: ``loop.collect(T)`` + ``buffer.add`` per env step, minus the same number of bare
  ``policy._forward_collect`` + gymnasium vector-env ``step`` calls (the part no loop can avoid): the
  collector's, the ``FiniteCheck``'s, the buffer's and the recording's overhead per env step;
* **loop**: ``loop.step`` per env step (everything: collect, add, the earned iterations, hooks, logging)
  with the fixed info dict below, minus the bare calls: the whole loop's own cost per env step;
* **learner**: ``buffer.sample`` + ``learner.train`` per iteration with the policy's ``_forward_learn`` replaced
  by a function returning a fixed info dict of the policy's keys (hooks, monitor, logging every ``log_freq``
  iterations to the table, TensorBoard and ``metrics.jsonl``); with ``--real-learn`` the real ``_forward_learn``
  runs and its own time is subtracted;
* **sb3** (``--sb3``): Stable-Baselines3 DQN's ``collect_rollouts`` per env step with ``train`` replaced by a no-op,
  minus its bare ``predict`` + ``env.step``, for comparison.

Each measurement is repeated ``--repeats`` times, interleaved; the median is printed. Checkpoints and evaluation
are switched off (they are not per-step costs)::

    .venv/bin/python benchmarks/bench_loop_overhead.py --repeats 5
    .venv/bin/python benchmarks/bench_loop_overhead.py --config td3_pendulum --sb3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List


def _cpu(fn: Callable[[], Any]) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def build(config: str, work_dir: Path) -> Any:
    import torch

    from rlearn.config import load_config
    from rlearn.run import Trainer

    torch.set_num_threads(1)
    cfg = load_config(config, overrides=["num_threads=1", "train.max_env_steps=1000000000", "eval.freq=1000000000",
                                         "checkpoint.freq=null"])
    trainer = Trainer(cfg, work_dir=work_dir, progress=False)
    trainer.learner.call_hook("before_run")
    return trainer


def fixed_info(policy: Any) -> Callable[[Any], Dict[str, Any]]:
    """A ``_forward_learn`` returning the policy's every-iteration keys as floats (and the sparse ones now and then)."""
    keys = list(policy.monitor_vars())
    every = [k for k in keys if k not in ("target_sync", "actor_loss", "alpha_loss", "alpha", "entropy")]
    sparse = [k for k in keys if k not in every]
    count = [0]

    def forward_learn(data: Any) -> Dict[str, Any]:
        count[0] += 1
        info = {k: 0.5 for k in every}
        if count[0] % 2 == 0:
            info.update({k: 1 for k in sparse})
        return info

    return forward_learn


def measure_collect(trainer: Any, steps: int) -> Dict[str, float]:
    loop, policy = trainer.loop, trainer.policy
    collector = trainer.collector
    n = loop.collect_steps
    calls = max(1, steps // (n * collector.num_envs))

    def looped() -> None:
        for _ in range(calls):
            result = loop.collect(n)
            trainer.buffer.add(result.transitions)

    raw_env = trainer.env.env  # FiniteCheck's inner gymnasium vector env
    obs = raw_env.reset(seed=0)[0]

    def bare() -> None:
        nonlocal obs
        envstep = collector.envstep
        for _ in range(calls * n):
            out = policy._forward_collect(obs, envstep)
            obs = raw_env.step(out.get("env_action", out["action"]))[0]

    total = calls * n * collector.num_envs
    t_loop = _cpu(looped) / total
    t_bare = _cpu(bare) / total
    return {"collect_us": 1e6 * t_loop, "bare_us": 1e6 * t_bare, "overhead_us": 1e6 * (t_loop - t_bare)}


def measure_learner(trainer: Any, iters: int, real: bool) -> Dict[str, float]:
    learner, buffer, policy = trainer.learner, trainer.buffer, trainer.policy
    batch_size = trainer.loop.batch_size
    inner = [0.0]
    if real:
        original = type(policy)._forward_learn

        def timed(data: Any) -> Dict[str, Any]:
            start = time.thread_time()
            info = original(policy, data)
            inner[0] += time.thread_time() - start
            return info

        policy._forward_learn = timed
    else:
        policy._forward_learn = fixed_info(policy)
    envstep = trainer.loop.envstep

    def run() -> None:
        for _ in range(iters):
            batch = buffer.sample(batch_size)
            learner.train(batch, envstep=envstep)

    def sample_only() -> None:
        for _ in range(iters):
            buffer.sample(batch_size)

    total = _cpu(run)
    t_sample = _cpu(sample_only)
    del policy._forward_learn
    overhead = (total - inner[0] - t_sample) / iters
    return {"iter_overhead_us": 1e6 * overhead, "sample_us": 1e6 * t_sample / iters,
            "forward_learn_us": 1e6 * inner[0] / iters}


def measure_loop(trainer: Any, steps: int) -> Dict[str, float]:
    """``loop.step`` (collect, add, the earned iterations with sampling, hooks, logging) per env step with a
    fixed-info ``_forward_learn``, minus the bare policy + environment calls of :func:`measure_collect`."""
    loop, policy, collector = trainer.loop, trainer.policy, trainer.collector
    policy._forward_learn = fixed_info(policy)

    class Guard:
        requested = False

    start_steps = collector.envstep
    elapsed = _cpu(lambda: [loop.step(Guard()) for _ in range(max(1, steps // (loop.collect_steps * collector.num_envs)))])
    del policy._forward_learn
    return {"step_us": 1e6 * elapsed / (collector.envstep - start_steps)}


def measure_sb3(steps: int) -> Dict[str, float]:
    import torch
    from stable_baselines3 import DQN

    torch.set_num_threads(1)
    model = DQN("MlpPolicy", "CartPole-v1", seed=0, device="cpu", verbose=0, learning_rate=2.3e-3, batch_size=64,
                buffer_size=100_000, learning_starts=1000, gamma=0.99, target_update_interval=10, train_freq=256,
                gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                policy_kwargs=dict(net_arch=[256, 256]))
    model.train = lambda gradient_steps, batch_size=64: None  # collection only
    model.learn(total_timesteps=2000)  # past learning_starts: greedy forwards as in training
    t_learn = _cpu(lambda: model.learn(total_timesteps=steps, reset_num_timesteps=False)) / steps
    env = model.get_env()
    obs = env.reset()

    def bare() -> None:
        nonlocal obs
        for _ in range(steps):
            action, _ = model.predict(obs, deterministic=False)
            obs = env.step(action)[0]

    t_bare = _cpu(bare) / steps
    return {"sb3_collect_us": 1e6 * t_learn, "sb3_bare_us": 1e6 * t_bare, "sb3_overhead_us": 1e6 * (t_learn - t_bare)}


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="dqn_cartpole")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4096, help="env steps per collect measurement")
    parser.add_argument("--iters", type=int, default=2048, help="iterations per learner measurement")
    parser.add_argument("--real-learn", action="store_true", help="also measure with the real _forward_learn")
    parser.add_argument("--sb3", action="store_true", help="also measure SB3 DQN's collection overhead")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    results: Dict[str, List[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_loop_") as tmp:
        trainer = build(args.config, Path(tmp) / "run")
        try:
            learning_starts = trainer.loop.learning_starts
            while trainer.collector.envstep <= learning_starts + 1000:  # past random actions, buffer filled
                trainer.buffer.add(trainer.loop.collect(trainer.loop.collect_steps).transitions)
            for _ in range(args.repeats):
                parts = [measure_collect(trainer, args.steps), measure_learner(trainer, args.iters, False),
                         measure_loop(trainer, args.steps)]
                parts[2]["loop_overhead_us"] = parts[2]["step_us"] - parts[0]["bare_us"]
                if args.real_learn:
                    real = measure_learner(trainer, args.iters, True)
                    parts.append({f"real_{k}": v for k, v in real.items()})
                if args.sb3:
                    parts.append(measure_sb3(args.steps))
                for part in parts:
                    for key, value in part.items():
                        results.setdefault(key, []).append(value)
        finally:
            trainer.close()
    medians = {key: statistics.median(values) for key, values in results.items()}
    if args.json:
        print(json.dumps(medians))
    else:
        for key, value in medians.items():
            spread = ", ".join(f"{v:.1f}" for v in results[key])
            print(f"{key:>28}: {value:8.1f} us   ({spread})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
