"""Cost of the default writers (table, TensorBoard, metrics.jsonl) against the 2 % logging budget of a TD3
iteration.

Three measurements, all in this process:

* **per log**: microseconds of one write + flush of each default writer (``TableWriter`` into a log file,
  ``TensorBoardWriter`` with its fsync, ``JsonlWriter``) with the key set of a ``td3_pendulum`` log
  (15 statistics, the throughput and the time left out of it), and of one whole log through the learner's
  metric path (window statistics of every key + the three writers), in alternating rounds (A B C ... C B A);
* **the TD3 iteration** it is compared with: collect one Pendulum step -> replay buffer -> ``sample(256)``
  -> ``TD3Policy`` ([400, 300], batch 256) -> ``learner.train``, timed in the same run; the per-iteration
  overhead of the writers is their per-log cost divided by ``log_freq`` (100, the learner's default, and
  1000, ``td3_pendulum``'s), as a % of that iteration;
* **paired blocks**: the same TD3 loop with ``LogShowHook`` at ``log_freq`` 100, once with the default
  writers and once with none (the hook and the statistics still run: only the writers differ), in blocks of
  100 iterations (one log each) in the order ABBA BAAB ...; the median over pairs of
  ``with / without - 1`` and its interquartile range.

    .venv/bin/python benchmarks/bench_writers.py            # ~2-3 min on an idle 2-core machine
    .venv/bin/python benchmarks/bench_writers.py --quick    # ~1 min

Timings on a shared machine are noisy: read the ratios, and the paired estimate together with its spread.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from tabulate import tabulate

#: the settings of the TD3 iteration (rl-zoo's TD3 Pendulum-v1 network and batch)
HIDDEN, BATCH, LR, GAMMA = [400, 300], 256, 1e-3, 0.98
#: the learner's default log_freq, and td3_pendulum's
LOG_FREQS = (100, 1000)
#: one td3_pendulum log, as LogShowHook writes it (throughput and time first, then the statistics)
TD3_LOG: Dict[str, float] = {
    "throughput/iters_per_sec": 125.16, "throughput/env_steps_per_sec": 125.16, "time/eval_s": 0.61,
    "time/checkpoint_s": 0.05, "critic_loss_avg": 0.023472, "critic_twin_loss_avg": 0.02771, "q_value_avg": -31.596,
    "q_value_twin_avg": -31.596, "target_q_value_avg": -31.597, "td_error_avg": 0.11753, "cur_lr_critic_avg": 0.001,
    "actor_loss_avg": 31.276, "cur_lr_actor_avg": 0.001, "data_time_avg": 0.0006313, "train_time_avg": 0.0067107,
    "collector/episode_return_avg": -1397.2, "collector/episode_length_avg": 200.0,
}


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _load() -> str:
    try:
        return "load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def file_logger(path: Path, name: str) -> logging.Logger:
    """A logger writing to ``path`` only, formatted like a run's log file."""
    logger = logging.getLogger(f"rlearn.bench.writers.{name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.handlers[:] = []
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    logger.addHandler(handler)
    return logger


def default_writers(work_dir: Path, name: str) -> List[Any]:
    """The three default writers, as ``learner.writers`` builds them (table into a log file)."""
    from rlearn.writers import JsonlWriter, TableWriter, TensorBoardWriter

    work_dir.mkdir(parents=True, exist_ok=True)
    return [TableWriter(file_logger(work_dir / f"{name}.log", name), width=120),
            TensorBoardWriter(work_dir / "tb"), JsonlWriter(work_dir / "metrics.jsonl")]


# ------------------------------------------------------------------------------------------ TD3 loop
class TD3Loop:
    """collect 1 step -> buffer -> sample(256) -> learner.train, on one Pendulum env (td3_pendulum's loop)."""

    def __init__(self, work_dir: Optional[Path], writers: Optional[List[Any]], log_freq: int = 100) -> None:
        from policies.td3 import TD3Policy
        from rlearn.buffer import ReplayBuffer
        from rlearn.collect import Collector
        from rlearn.env import make_vector_env
        from rlearn.hooks import LogShowHook, TimerHook
        from rlearn.learner import BaseLearner

        self.env = make_vector_env("Pendulum-v1", 1, seed=0)
        policy = TD3Policy(dict(hidden_sizes=HIDDEN, batch_size=BATCH, lr_actor=LR, lr_critic=LR, gamma=GAMMA,
                                learning_starts=0, learn_threads=1, adaptive_threads=False),
                           self.env.single_observation_space, self.env.single_action_space, seed=0)
        self.collector = Collector(self.env, policy, seed=0)
        self.buffer = ReplayBuffer(200_000, (3,), (1,), seed=0)
        self.buffer.add(self.collector.collect(1000).transitions)
        self.learner = BaseLearner(policy, dict(log_freq=log_freq), work_dir=work_dir, writers=writers)
        self.learner.register_hook(TimerHook(), "HIGHEST")
        self.learner.register_hook(LogShowHook(), "BELOW_NORMAL")
        self.learner.declare_monitor_vars(["collector/episode_return", "collector/episode_length"])
        self.learner.call_hook("before_run")

    def run(self, n: int) -> None:
        for _ in range(n):
            result = self.collector.collect(1)
            self.buffer.add(result.transitions)
            for episode in result.episodes:
                self.learner.record({"collector/episode_return": episode["episode_return"],
                                     "collector/episode_length": episode["episode_length"]})
            self.learner.train(self.buffer.sample(BATCH), envstep=self.collector.envstep)

    def close(self) -> None:
        self.learner.call_hook("after_run")
        self.env.close()


# ---------------------------------------------------------------------------------------- measuring
def per_log(tmp: Path, logs: int, rounds: int, learner: Any) -> Dict[str, float]:
    """Median microseconds per write + flush of each default writer, and of one whole log of ``learner``
    (statistics of its keys + the writers) through ``log_metrics``."""
    table, tensorboard, jsonl = default_writers(tmp / "per_log", "per_log")
    variants: Dict[str, Callable[[int], None]] = {}
    for label, writer in (("table", table), ("tensorboard", tensorboard), ("jsonl", jsonl)):
        def write(i: int, writer: Any = writer) -> None:
            writer.write_scalars(TD3_LOG, 1000 + i, 1000 + i)
            writer.flush()
        variants[label] = write

    def whole_log(i: int) -> None:
        learner.log_metrics(extra={k: v for k, v in TD3_LOG.items() if k.startswith(("throughput/", "time/"))})

    variants["one whole log (statistics + 3 writers)"] = whole_log
    times: Dict[str, List[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            for i in range(logs):
                variants[name](i)
            times[name].append((time.perf_counter() - start) / logs * 1e6)
    for writer in (table, tensorboard, jsonl):
        writer.close()
    return {name: _median(t) for name, t in times.items()}


def paired_blocks(tmp: Path, pairs: int, block: int = 100) -> Dict[str, Any]:
    """The TD3 loop with the default writers vs with none, ABBA BAAB ... blocks of ``block`` iterations."""
    loops = {
        "no writers": TD3Loop(None, []),
        "default writers": TD3Loop(tmp / "paired", default_writers(tmp / "paired", "paired")),
    }
    for loop in loops.values():
        loop.run(block)  # warm-up; both stay aligned on multiples of the log frequency
    names = list(loops)
    wall: Dict[str, List[float]] = {name: [] for name in names}
    for i in range(pairs):
        for name in (names if i % 4 in (0, 3) else names[::-1]):
            start = time.perf_counter()
            loops[name].run(block)
            wall[name].append((time.perf_counter() - start) / block * 1e3)
    learner = loops["default writers"].learner
    for loop in loops.values():
        loop.close()
    ratios = sorted((w / b - 1) * 100 for b, w in zip(wall["no writers"], wall["default writers"]))
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    return dict(pairs=pairs, block=block, without_ms=_median(wall["no writers"]), with_ms=_median(wall["default writers"]),
                paired_pct=statistics.median(ratios), iqr_pct=(q[0], q[2]), logs=learner.get_hook("LogShowHook").logs)


def main(argv: Optional[Sequence[str]] = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and pairs (~1 min)")
    parser.add_argument("--pairs", type=int, default=None, help="ABBA pairs of 100-iteration blocks (default 24, quick 8)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    pairs = args.pairs or (8 if args.quick else 24)
    logs, rounds = (100, 4) if args.quick else (300, 8)
    print(f"bench_writers: torch threads 1, {_load()}")
    with tempfile.TemporaryDirectory(prefix="bench_writers_") as name:
        tmp = Path(name)
        # the TD3 iteration itself, without writers (the hooks still run), timed first
        iteration_loop = TD3Loop(None, [])
        iteration_loop.run(200)
        samples = []
        for _ in range(5 if args.quick else 10):
            start = time.perf_counter()
            iteration_loop.run(100)
            samples.append((time.perf_counter() - start) / 100 * 1e3)
        iteration_ms = _median(samples)
        # one whole log of a learner that has trained (real windows, every td3 key)
        trained = TD3Loop(tmp / "whole", default_writers(tmp / "whole", "whole"), log_freq=10**9)
        trained.run(200)
        costs = per_log(tmp, logs, rounds, trained.learner)
        trained.close()
        iteration_loop.close()
        paired = paired_blocks(tmp, pairs)

    writers_us = sum(costs[k] for k in ("table", "tensorboard", "jsonl"))
    rows = []
    for label, us in costs.items():
        rows.append([label, f"{us:.0f}"] + [f"{us / freq / (iteration_ms * 1e3) * 100:.3f} %" for freq in LOG_FREQS])
    rows.append(["3 default writers together", f"{writers_us:.0f}"]
                + [f"{writers_us / freq / (iteration_ms * 1e3) * 100:.3f} %" for freq in LOG_FREQS])
    print(f"\nTD3 iteration ([400, 300], batch 256, 1 thread; collect + buffer + train, no writers): "
          f"{iteration_ms:.2f} ms (median of 100-iteration blocks)\n")
    print(tabulate(rows, headers=["per log", "us", f"per iteration at log_freq {LOG_FREQS[0]}",
                                  f"at log_freq {LOG_FREQS[1]} (td3_pendulum)"]))
    print(f"\npaired blocks ({paired['pairs']} ABBA pairs of {paired['block']} iterations, log_freq 100, one log per "
          f"block; {paired['logs']} logs written): without writers {paired['without_ms']:.2f} ms/iter, with the "
          f"default writers {paired['with_ms']:.2f} ms/iter; paired median {paired['paired_pct']:+.2f} % "
          f"(interquartile {paired['iqr_pct'][0]:+.2f} .. {paired['iqr_pct'][1]:+.2f} %); budget 2 %")
    print(f"{_load()} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
