"""Env steps per second with 1 process vs N processes (``rlearn train CONFIG --nproc N``).

Each run trains the same config for the same *global* env-step budget through the command line, once in
one process and once in ``--nproc`` processes (torchrun, gloo). Throughput is read back from the run's
TensorBoard file (``throughput_step/env_steps_per_sec``, written by LogShowHook at every table: global
env steps divided by wall time since the previous table), and the median over the tables after the first
is reported, so process start-up, imports and the first table's warm-up are left out. Runs alternate
(1, N, 1, N, ...) and the best of the repeats is kept for each.

Honest caveat: this machine has 2 CPU cores, shared with other jobs while these numbers were taken. With
N processes on 2 cores, every rank competes for the same cores, so the ideal ratio is at most
min(N, free cores); DDP's gradient all-reduce and the rank-0-only evaluation add to it. A ratio well
above 1 shows the ranks really collect and learn in parallel; the absolute numbers mean little.

    .venv/bin/python benchmarks/bench_distributed.py              # ppg_cartpole, 40k env steps, 2 repeats
    .venv/bin/python benchmarks/bench_distributed.py --quick      # 12k env steps, 1 repeat
    .venv/bin/python benchmarks/bench_distributed.py --config td3_pendulum --nproc 2
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from tabulate import tabulate

REPO = Path(__file__).resolve().parent.parent

#: extra overrides per bundled config, so that a short run spends its time collecting and learning
CONFIG_OVERRIDES: Dict[str, List[str]] = {
    "ppg_cartpole": ["learner.log_freq=4", "learner.monitor_window=4", "eval.freq=null", "checkpoint.freq=null"],
    "td3_pendulum": ["policy.learning_starts=1000", "learner.log_freq=200", "eval.freq=null",
                     "checkpoint.freq=null"],
}


def env_steps_per_sec(tb_dir: Path) -> Optional[float]:
    """Median of ``throughput_step/env_steps_per_sec`` over the tables after the first one."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    values: List[float] = []
    for event_file in sorted(tb_dir.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(event_file), size_guidance={"scalars": 0})
        acc.Reload()
        if "throughput_step/env_steps_per_sec" in acc.Tags()["scalars"]:
            values += [e.value for e in acc.Scalars("throughput_step/env_steps_per_sec")]
    return statistics.median(values[1:]) if len(values) > 1 else None


def run(config: str, nproc: int, steps: int, work_dir: Path) -> Dict[str, Optional[float]]:
    overrides = [f"train.max_env_steps={steps}", *CONFIG_OVERRIDES.get(config, [])]
    command = [sys.executable, "-m", "rlearn", "train", config, "--work-dir", str(work_dir), "--no-progress",
               "--set", *overrides]
    if nproc > 1:
        command += ["--nproc", str(nproc)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    rate = env_steps_per_sec(work_dir / "tb")
    if rate is None:
        raise SystemExit(f"{config} with {nproc} process(es): fewer than two throughput points after the first "
                         f"table in {steps} env steps; give more --steps")
    return {"env_steps_per_sec": rate, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="ppg_cartpole", help="bundled config or config file")
    parser.add_argument("--nproc", type=int, default=2, help="processes of the distributed run")
    parser.add_argument("--steps", type=int, default=None, help="global env-step budget per run")
    parser.add_argument("--repeats", type=int, default=None, help="runs per setting (best is kept)")
    parser.add_argument("--quick", action="store_true", help="short runs, one repeat")
    args = parser.parse_args()
    steps = args.steps or (12_000 if args.quick else 40_000)
    repeats = args.repeats or (1 if args.quick else 2)

    best: Dict[int, Dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for nproc in (1, args.nproc):
                result = run(args.config, nproc, steps, Path(tmp) / f"n{nproc}_r{repeat}")
                rate = result["env_steps_per_sec"]
                print(f"  run {repeat + 1}/{repeats}, {nproc} process(es): {rate:.0f} env steps/s "
                      f"(wall {result['wall_s']:.1f} s incl. start-up)", flush=True)
                if nproc not in best or (rate or 0) > (best[nproc]["env_steps_per_sec"] or 0):
                    best[nproc] = result
    one, many = best[1], best[args.nproc]
    rows = [
        ["1 process", f"{one['env_steps_per_sec']:.0f}", f"{one['wall_s']:.1f}", "1.00"],
        [f"{args.nproc} processes (torchrun, gloo)", f"{many['env_steps_per_sec']:.0f}", f"{many['wall_s']:.1f}",
         f"{many['env_steps_per_sec'] / one['env_steps_per_sec']:.2f}"],
    ]
    print()
    print(f"{args.config}: {steps} global env steps per run, best of {repeats}")
    print(tabulate(rows, headers=["setting", "env steps/s (steady state)", "wall s (incl. start-up)",
                                  "ratio vs 1 process"], tablefmt="github"))
    print("\nCaveat: 2 CPU cores on this machine, shared with other jobs; with more processes than free cores "
          "the ratio cannot exceed the number of free cores. Treat the numbers as indicative.")


if __name__ == "__main__":
    main()
