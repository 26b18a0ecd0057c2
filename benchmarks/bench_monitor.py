"""Speed of rlearn's monitoring core, side by side with what users would otherwise pick.

Compares ``rlearn.logging.HistoryBuffer`` with MMEngine's ``HistoryBuffer`` (``pip install -e '.[bench]'``)
and a naive Python-list buffer, and -- when ``rlearn.monitor.TickMonitor`` is available -- the TickMonitor
with a DI-engine-style per-key deque reference. Results are printed as tables of microseconds plus ratios.

    .venv/bin/python benchmarks/bench_monitor.py            # 10^4, 10^5, 10^6 updates
    .venv/bin/python benchmarks/bench_monitor.py --quick    # 10^4, 10^5 updates, fewer repeats

rlearn's ``update`` is O(1) amortised (arrays grown by doubling up to about ``max_length``); its statistics read
the window's slice in C (numpy, ``math.fsum`` for the exact mean), so their cost grows with the window, as
MMEngine's does (the "global" rows: the whole history). MMEngine appends with ``np.append`` (a full copy per
update, O(n)), so a run of n updates costs O(n^2).
It is run in full only up to ``--mmengine-cap`` updates (10^5 by default: ~10 s; 10^4 with ``--quick``);
for longer runs the table extrapolates from the largest full run, per-update cost proportional to n,
and marks the number "(extrap.)".
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import defaultdict, deque
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from tabulate import tabulate

from rlearn.logging import HistoryBuffer

try:  # optional comparison target
    from mmengine.logging import HistoryBuffer as MMEngineHistoryBuffer
except Exception as exc:  # noqa: BLE001 - any import failure just removes the column
    MMEngineHistoryBuffer = None
    MMENGINE_ERROR = f"{type(exc).__name__}: {exc}"
else:
    MMENGINE_ERROR = ""

try:  # written in parallel by another module owner; the section is skipped without it
    from rlearn.monitor import TickMonitor
except Exception as exc:  # noqa: BLE001
    TickMonitor = None
    MONITOR_ERROR = f"{type(exc).__name__}: {exc}"
else:
    MONITOR_ERROR = ""


# ---------------------------------------------------------------------- references
class NaiveListBuffer:
    """The obvious implementation: two growing lists, statistics by slicing (O(window))."""

    def __init__(self) -> None:
        self.values: List[float] = []
        self.counts: List[float] = []

    def update(self, value: float, count: float = 1) -> None:
        self.values.append(value)
        self.counts.append(count)

    def mean(self, window_size: int) -> float:
        return sum(self.values[-window_size:]) / sum(self.counts[-window_size:])

    def min(self, window_size: int) -> float:
        return min(self.values[-window_size:])


class DIEngineStyleMonitor:
    """DI-engine-style TickMonitor reference: per-key deque of (tick, value), O(window) average."""

    def __init__(self, window_size: int) -> None:
        self.window_size = window_size
        self.time = 0
        self.history: Dict[str, deque] = defaultdict(deque)

    def update(self, info: Dict[str, float]) -> None:
        for key, value in info.items():
            history = self.history[key]
            history.append((self.time, float(value)))
            while history and history[0][0] <= self.time - self.window_size:
                history.popleft()

    def tick(self) -> None:
        self.time += 1

    def avg(self, key: str) -> Optional[float]:
        start = self.time - self.window_size
        values = [v for t, v in self.history[key] if t > start]
        return sum(values) / len(values) if values else None


# ---------------------------------------------------------------------- timing helpers
def best_of(repeats: int, fn: Callable[[], float]) -> float:
    """Smallest of ``repeats`` measurements (seconds): the least disturbed by the other processes."""
    results = []
    for _ in range(repeats):
        gc.collect()
        results.append(fn())
    return min(results)


def time_updates(make: Callable[[], object], values: Sequence[float]) -> float:
    buffer = make()
    update = buffer.update
    start = time.perf_counter()
    for v in values:
        update(v, 1)
    return time.perf_counter() - start


def time_calls(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def ratio(a: Optional[float], b: Optional[float]) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.1f}x"


def us(seconds: Optional[float], note: str = "") -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.3f}{note}"


# ---------------------------------------------------------------------- sections
def bench_updates(sizes: Sequence[int], repeats: int, mmengine_cap: int) -> None:
    print("\n## Update cost (microseconds per update over a run of n updates)\n")
    rows = []
    measured = None  # (n, seconds per update) of MMEngine's largest full run
    for n in sizes:
        values = np.random.default_rng(0).random(n).tolist()
        r = best_of(repeats, lambda: time_updates(HistoryBuffer, values)) / n
        naive = best_of(repeats, lambda: time_updates(NaiveListBuffer, values)) / n
        mm, note = None, ""
        if MMEngineHistoryBuffer is not None:
            if n <= mmengine_cap or measured is None:
                mm = best_of(1, lambda: time_updates(MMEngineHistoryBuffer, values)) / n
                measured = (n, mm)
            else:  # O(n) per update: the per-update cost of a run grows linearly with its length
                n0, mm0 = measured
                mm, note = mm0 * n / n0, " (extrap.)"
        rows.append([f"{n:,}", us(r), us(naive), us(mm, note), ratio(r, naive), ratio(mm, r)])
    print(tabulate(rows, headers=["n", "rlearn", "naive list", "MMEngine", "rlearn / naive", "MMEngine / rlearn"]))


def bench_statistics(sizes: Sequence[int], windows: Sequence[int], calls: int) -> None:
    print("\n## Statistic cost at log time (microseconds per call on a buffer holding n values)\n")
    rows = []
    for n in sizes:
        values = np.random.default_rng(1).random(n)
        ours = HistoryBuffer(values, np.ones(n), max_length=max(n, 1))
        naive = NaiveListBuffer()
        naive.values, naive.counts = values.tolist(), [1.0] * n
        mm = MMEngineHistoryBuffer(values, np.ones(n), max_length=n) if MMEngineHistoryBuffer is not None else None
        for w in list(windows) + [n]:
            label = "global" if w == n else str(w)
            r_mean = time_calls(lambda: ours.mean(w), calls)
            n_mean = time_calls(lambda: naive.mean(w), max(10, calls // max(1, w // 100)))
            m_mean = time_calls(lambda: mm.mean(w), max(10, calls // 10)) if mm is not None else None
            r_min = time_calls(lambda: ours.min(w), max(10, calls // 10))
            n_min = time_calls(lambda: naive.min(w), max(10, calls // max(1, w // 100)))
            rows.append([
                f"{n:,}", label, us(r_mean), us(n_mean), us(m_mean), ratio(n_mean, r_mean), ratio(m_mean, r_mean),
                us(r_min), us(n_min), ratio(n_min, r_min),
            ])
    print(tabulate(rows, headers=[
        "n", "window", "rlearn mean", "naive mean", "MMEngine mean", "naive / rlearn", "MMEngine / rlearn",
        "rlearn min", "naive min", "naive / rlearn",
    ]))


def bench_tick_monitor(windows: Sequence[int], iterations: int, repeats: int) -> None:
    print("\n## TickMonitor: one iteration (12 key updates + tick) and the average of 12 keys at log time\n")
    print("(microseconds; the DI-engine-style reference is a lean re-implementation written in this script)\n")
    keys = [f"key{i}" for i in range(12)]
    rng = np.random.default_rng(2)
    infos = [{k: float(v) for k, v in zip(keys, rng.random(12))} for _ in range(iterations)]
    makers = {"rlearn": lambda w: TickMonitor(window_size=w), "DI-engine style": DIEngineStyleMonitor}
    rows = []
    for w in windows:
        results = {}
        for label, make in makers.items():
            monitors = []

            def run_iterations() -> float:
                monitor = make(w)
                monitors.append(monitor)
                update, tick = monitor.update, monitor.tick
                start = time.perf_counter()
                for info in infos:
                    update(info)
                    tick()
                return (time.perf_counter() - start) / len(infos)

            per_iter = best_of(repeats, run_iterations)
            monitor = monitors[-1]
            monitor.update(infos[0])  # the current tick holds values, as at log time

            def average_all() -> float:
                start = time.perf_counter()
                for _ in range(100):
                    for k in keys:
                        monitor.avg(k)
                return (time.perf_counter() - start) / 100

            results[label] = (per_iter, best_of(repeats, average_all))
        (ri, ra), (di, da) = results["rlearn"], results["DI-engine style"]
        rows.append([w, us(ri), us(di), ratio(di, ri), us(ra), us(da), ratio(da, ra)])
    print(tabulate(rows, headers=[
        "window", "rlearn iter", "DI-style iter", "DI / rlearn", "rlearn avg x12", "DI-style avg x12", "DI / rlearn",
    ]))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^4 and 10^5 updates only, fewer repeats")
    parser.add_argument("--mmengine-cap", type=int, default=None,
                        help="largest n run in full with MMEngine (default: 10^5, 10^4 with --quick)")
    args = parser.parse_args(argv)
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    repeats = 2 if args.quick else 3
    cap = args.mmengine_cap if args.mmengine_cap is not None else (10_000 if args.quick else 100_000)

    print("# bench_monitor" + (" (quick)" if args.quick else ""))
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; times are the best of {repeats} runs")
    if MMEngineHistoryBuffer is None:
        print(f"MMEngine columns skipped: cannot import mmengine.logging.HistoryBuffer ({MMENGINE_ERROR}); "
              "install it with: pip install -c constraints.txt -e '.[bench]'")
    else:
        print(f"MMEngine: full runs up to n = {cap:,}; longer runs are extrapolated from the largest full run "
              "(its np.append copies the whole history on every update, so the cost per update grows like n)")

    bench_updates(sizes, repeats, cap)
    bench_statistics(sizes, windows=(10, 100, 1000), calls=2000 if args.quick else 10_000)
    if TickMonitor is None:
        print(f"\nTickMonitor section skipped: cannot import rlearn.monitor.TickMonitor ({MONITOR_ERROR})")
    else:
        bench_tick_monitor(windows=(10, 100, 1000), iterations=2000 if args.quick else 10_000, repeats=repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
