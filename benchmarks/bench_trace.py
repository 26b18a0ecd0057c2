"""Cost of the timeline trace: per ``span`` call (off and on) and on a real training run.

Part 1 times one phase marker per loop iteration, best of several repeats, in nanoseconds per call:

* a bare loop and a ``with`` on a shared no-op object (the floor any context manager pays);
* ``rlearn.trace.span`` while tracing is off (the default: must be near the floor) and on (recording to a
  temporary work dir);
* what one would otherwise write: a ``time.perf_counter_ns()`` pair appended to a list, and
  ``torch.profiler.record_function`` (outside and inside an active ``torch.profiler.profile``).

Part 2 trains a tiny TD3 (and PPG, unless ``--quick``) with :func:`rlearn.run.train`, with
``profile`` off and on, alternating the runs (off, on, off, on, ...), and prints the wall-time ratio
on/off and CPU-time ratio (this process; less sensitive to other processes' load), medians over the pairs,
plus an estimate free of run-to-run noise: records written x the measured
cost of one traced span / run time. The design target is at most 3% slower with tracing on.

    .venv/bin/python benchmarks/bench_trace.py            # 10^6 calls per timing, 4 training pairs per algorithm
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
from typing import Callable, Dict, List, Tuple

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


def per_call_table(n: int, repeats: int) -> float:
    """Print the per-call table; return the cost of a traced span with an arg (ns)."""
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
    return rows["span(iter=i), tracing on"] - floor


# ---------------------------------------------------------------------------------------------- part 2
TINY = {
    "td3": ["policy.learning_starts=300", "policy.batch_size=64", "policy.hidden_sizes=[64,64]",
            "policy.learn_threads=1", "learner.log_freq=100000", "eval.freq=1000000", "eval.episodes=1",
            "checkpoint.freq=1000000"],
    "ppg": ["learner.log_freq=100000", "eval.freq=1000000", "eval.episodes=1", "checkpoint.freq=1000000"],
}
CONFIG = {"td3": "td3_pendulum", "ppg": "ppg_cartpole"}


def count_records(work_dir: Path) -> int:
    """Span and counter lines written by a run."""
    return sum(sum(1 for line in path.open() if '"type":"header"' not in line)
               for path in (work_dir / "trace").glob("rank*.jsonl"))


def train_seconds(algo: str, steps: int, profile: bool, root: Path, index: int) -> Tuple[float, float, int]:
    """Wall seconds, CPU seconds (this process, all threads) and records written by one training run."""
    from rlearn.config import load_config
    from rlearn.run import train

    overrides = TINY[algo] + [f"train.max_env_steps={steps}", f"profile={profile}"]
    cfg = load_config(CONFIG[algo], overrides=overrides)
    work_dir = root / f"{algo}_{'on' if profile else 'off'}_{index}"
    start, cpu_start = time.perf_counter(), time.process_time()
    train(cfg, work_dir=work_dir, progress=False)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    records = count_records(work_dir) if profile else 0
    if profile and not records:
        raise RuntimeError(f"profile=True wrote no trace records in {work_dir}")
    return elapsed, cpu, records


def training_table(algos: List[str], steps: Dict[str, int], pairs: int, span_on_ns: float) -> None:
    """Alternating runs (off/on, then on/off, ...) so that a drift in machine load hits both sides."""
    import logging

    logging.disable(logging.INFO)  # the runs' own log lines are not the point here
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for algo in algos:
            off, on, cpu_off, cpu_on, records = [], [], [], [], 0
            for index in range(pairs):
                order = (False, True) if index % 2 == 0 else (True, False)
                for profile in order:
                    seconds, cpu, count = train_seconds(algo, steps[algo], profile, Path(tmp), index)
                    (on if profile else off).append(seconds)
                    (cpu_on if profile else cpu_off).append(cpu)
                    records = max(records, count)
                print(f"  {algo} pair {index + 1}: wall off {off[-1]:.2f} s, on {on[-1]:.2f} s; "
                      f"cpu off {cpu_off[-1]:.2f} s, on {cpu_on[-1]:.2f} s", flush=True)
            wall = statistics.median(b / a for a, b in zip(off, on))
            cpu = statistics.median(b / a for a, b in zip(cpu_off, cpu_on))
            estimate = 100 * records * span_on_ns * 1e-9 / min(off)
            rows.append([algo, steps[algo], pairs, records, min(off), min(on), (wall - 1) * 100, (cpu - 1) * 100,
                         estimate])
    print("\nTraining time, tracing off vs on (alternating runs; slowdowns are medians over the pairs):")
    print(tabulate(rows, headers=["algo", "env steps", "pairs", "records", "best off (s)", "best on (s)",
                                  "wall slowdown %", "cpu slowdown %", "records x span cost %"],
                   floatfmt=("", "", "", "", ".2f", ".2f", "+.1f", "+.1f", ".2f")))
    print("'records x span cost' = records written x the 'span(iter=i), tracing on' cost above / best off time:\n"
          "the overhead the recorder itself adds, free of the run-to-run noise of the measured column.")


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, one TD3 training pair")
    parser.add_argument("--no-training", action="store_true", help="only the per-call timings")
    parser.add_argument("--pairs", type=int, default=None, help="training runs per side (default 4; 1 with --quick)")
    parser.add_argument("--algos", default=None, help="comma-separated: td3,ppg (default both; td3 with --quick)")
    args = parser.parse_args(argv)
    n, repeats = (100_000, 3) if args.quick else (1_000_000, 5)
    print("Timings on a shared machine are noisy; compare the ratios.")
    algos = args.algos.split(",") if args.algos else (["td3"] if args.quick else ["td3", "ppg"])
    unknown = [algo for algo in algos if algo not in CONFIG]
    if unknown:
        parser.error(f"--algos: unknown {unknown}; choose from {sorted(CONFIG)}")
    span_on_ns = per_call_table(n, repeats)
    if not args.no_training:
        steps = {"td3": 800 if args.quick else 1500, "ppg": 4096}
        pairs = args.pairs or (1 if args.quick else 4)
        training_table(algos, steps, pairs=pairs, span_on_ns=span_on_ns)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
