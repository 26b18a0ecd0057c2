"""Cost of the timeline trace: per ``span`` call (off and on) and on a real training run.

Part 1 times one phase marker per loop iteration, best of several repeats, in nanoseconds per call:

* a bare loop and a ``with`` on a shared no-op object (the floor any context manager pays);
* ``rlearn.trace.span`` while tracing is off (the default: must be near the floor) and on (recording to a
  temporary work dir);
* what one would otherwise write: a ``time.perf_counter_ns()`` pair appended to a list, and
  ``torch.profiler.record_function`` (outside and inside an active ``torch.profiler.profile``).

Part 2 trains a tiny TD3 (and PPG, unless ``--quick``) with :func:`rlearn.pipeline.serial_pipeline`, with
``profile`` off and on, alternating the runs (off, on, off, on, ...), and prints the wall-time ratio
on/off (median over the pairs). The design target is at most 3% slower with tracing on.

    .venv/bin/python benchmarks/bench_trace.py            # 10^6 calls per timing, 3 training pairs per algorithm
    .venv/bin/python benchmarks/bench_trace.py --quick    # 10^5 calls, 1 TD3 pair
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

from tabulate import tabulate

import rlearn.trace as trace


def best_ns_per_call(loop: Callable[[int], None], n: int, repeats: int) -> float:
    """Best (smallest) time of ``loop(n)`` over ``repeats`` runs, in ns per iteration."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        loop(n)
        best = min(best, (time.perf_counter_ns() - start) / n)
    return best


# ---------------------------------------------------------------------------------------------- part 1
def bare(n: int) -> None:
    for _ in range(n):
        pass


NULL = contextlib.nullcontext()


def with_shared_null(n: int) -> None:
    for _ in range(n):
        with NULL:
            pass


def span_plain(n: int) -> None:
    span = trace.span
    for _ in range(n):
        with span("learner/forward", lane="learner"):
            pass


def span_with_arg(n: int) -> None:
    span = trace.span
    for i in range(n):
        with span("learner/iteration", lane="learner", iter=i):
            pass


def perf_counter_pair(n: int) -> None:
    clock = time.perf_counter_ns
    records: List[tuple] = []
    append = records.append
    for _ in range(n):
        start = clock()
        append(("learner/forward", start, clock()))


def record_function(n: int) -> None:
    from torch.profiler import record_function as rf

    for _ in range(n):
        with rf("learner/forward"):
            pass


def record_function_profiled(n: int) -> None:
    import torch.profiler

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        record_function(n)


def per_call_table(n: int, repeats: int) -> None:
    rows: Dict[str, float] = {}
    rows["bare loop"] = best_ns_per_call(bare, n, repeats)
    rows["with <shared no-op>"] = best_ns_per_call(with_shared_null, n, repeats)
    trace.disable()
    rows["span, tracing off"] = best_ns_per_call(span_plain, n, repeats)
    rows["span(iter=i), tracing off"] = best_ns_per_call(span_with_arg, n, repeats)
    with tempfile.TemporaryDirectory() as tmp:
        trace.enable(tmp)
        rows["span, tracing on"] = best_ns_per_call(span_plain, n, repeats)
        rows["span(iter=i), tracing on"] = best_ns_per_call(span_with_arg, n, repeats)
        trace.disable()
        size = (Path(tmp) / "trace" / "rank0.jsonl").stat().st_size
        lines = 1 + 2 * n * repeats
    rows["perf_counter_ns pair + list.append"] = best_ns_per_call(perf_counter_pair, n, repeats)
    try:
        rows["torch record_function (no profiler)"] = best_ns_per_call(record_function, n, repeats)
        rows["torch record_function (profiler on)"] = best_ns_per_call(record_function_profiled, max(n // 10, 1000),
                                                                       repeats)
    except ImportError as exc:  # torch is a dependency, but keep part 1 usable without it
        print(f"torch.profiler unavailable: {exc}")
    floor = rows["bare loop"]
    reference = rows.get("torch record_function (no profiler)")
    table = []
    for name, ns in rows.items():
        table.append([name, ns, ns - floor, (ns - floor) / (rows["span, tracing off"] - floor),
                      "" if reference is None else ns / reference])
    print(f"\nPer call, best of {repeats} x {n:,} calls (ns):")
    print(tabulate(table, headers=["phase marker", "ns/call", "overhead vs bare loop", "overhead / span off",
                                   "ns / record_function"], floatfmt=("", ".1f", ".1f", ".2f", ".2f")))
    print(f"records written while on: {size / lines:.0f} bytes per line on average")


# ---------------------------------------------------------------------------------------------- part 2
TINY = {
    "td3": ["policy.learning_starts=300", "policy.batch_size=64", "policy.hidden_sizes=[64,64]",
            "policy.learn_threads=1", "learner.log_freq=100000", "eval.freq=1000000", "eval.episodes=1",
            "checkpoint.freq=1000000"],
    "ppg": ["learner.log_freq=100000", "eval.freq=1000000", "eval.episodes=1", "checkpoint.freq=1000000"],
}
CONFIG = {"td3": "td3_pendulum", "ppg": "ppg_cartpole"}


def train_seconds(algo: str, steps: int, profile: bool, root: Path, index: int) -> float:
    from rlearn.config import load_config
    from rlearn.pipeline import serial_pipeline

    overrides = TINY[algo] + [f"train.max_env_steps={steps}", f"profile={profile}"]
    cfg = load_config(CONFIG[algo], overrides=overrides)
    work_dir = root / f"{algo}_{'on' if profile else 'off'}_{index}"
    start = time.perf_counter()
    serial_pipeline(cfg, work_dir=work_dir, progress=False)
    elapsed = time.perf_counter() - start
    if profile and not any((work_dir / "trace").glob("rank*.jsonl")):
        raise RuntimeError(f"profile=True wrote no trace records in {work_dir}")
    return elapsed


def training_table(algos: List[str], steps: Dict[str, int], pairs: int) -> None:
    import logging

    logging.disable(logging.INFO)  # the runs' own log lines are not the point here
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for algo in algos:
            off, on = [], []
            for index in range(pairs):
                off.append(train_seconds(algo, steps[algo], False, Path(tmp), index))
                on.append(train_seconds(algo, steps[algo], True, Path(tmp), index))
                print(f"  {algo} pair {index + 1}: off {off[-1]:.2f} s, on {on[-1]:.2f} s", flush=True)
            ratio = statistics.median(b / a for a, b in zip(off, on))
            rows.append([algo, steps[algo], pairs, min(off), min(on), ratio, (ratio - 1) * 100])
    print("\nTraining wall time, tracing off vs on (alternating runs):")
    print(tabulate(rows, headers=["algo", "env steps", "pairs", "best off (s)", "best on (s)",
                                  "median on/off", "slowdown %"], floatfmt=("", "", "", ".2f", ".2f", ".3f", "+.1f")))


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, one TD3 training pair")
    parser.add_argument("--no-training", action="store_true", help="only the per-call timings")
    args = parser.parse_args(argv)
    n, repeats = (100_000, 3) if args.quick else (1_000_000, 5)
    print("Timings on a shared machine are noisy; compare the ratios.")
    per_call_table(n, repeats)
    if not args.no_training:
        algos = ["td3"] if args.quick else ["td3", "ppg"]
        steps = {"td3": 800 if args.quick else 1500, "ppg": 4096}
        training_table(algos, steps, pairs=1 if args.quick else 3)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
