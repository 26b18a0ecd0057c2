"""Cost of one log table: rlearn's compact TableWriter against stacked grid tables.

Renders and logs (through a formatter into a string stream) the 16 columns of a TD3 log, in alternating
rounds (A B B A ...), and prints the median microseconds per log of each layout and their ratio, with the
line count of each. The grid baseline is tabulate's ``grid`` format cut into one-row tables that fit the
width. Run: ``python benchmarks/bench_table.py``.
"""

from __future__ import annotations

import io
import logging
import statistics
import time
from typing import Dict, List, Tuple

from tabulate import tabulate

from rlearn.writers import TableWriter
from rlearn.writers.table import format_value

SCALARS: Dict[str, float] = {
    "throughput/iters_per_sec": 25.16, "throughput/env_steps_per_sec": 25.16,
    "critic_loss_avg": 0.023472, "critic_twin_loss_avg": 0.02771, "q_value_avg": -31.596,
    "q_value_twin_avg": -31.596, "target_q_value_avg": -31.597, "td_error_avg": 0.11753,
    "cur_lr_critic_avg": 0.001, "actor_loss_avg": 31.276, "cur_lr_actor_avg": 0.001, "data_time_avg": 0.0026313,
    "train_time_avg": 0.037107, "collector/episode_return_avg": -1397.2, "collector/episode_length_avg": 200.0,
}


def grid_tables(scalars: Dict[str, float], step_iter: int, step_env: int, width: int = 120) -> str:
    """The previous layout: one-row grid tables, columns in write order, cut to fit ``width``."""
    columns: List[Tuple[str, str]] = [("train_iter", str(step_iter)), ("envstep", str(step_env))]
    columns += [(name, format_value(value)) for name, value in scalars.items()]
    chunks, current, used = [], [], 1
    for name, value in columns:
        need = max(len(name) + 2, len(value)) + 3
        if current and used + need > width:
            chunks.append(current)
            current, used = [], 1
        current.append((name, value))
        used += need
    chunks.append(current)
    return "\n".join(tabulate([[v for _, v in chunk]], headers=[n for n, _ in chunk], tablefmt="grid",
                              disable_numparse=True, stralign="right") for chunk in chunks)


def logger(name: str) -> logging.Logger:
    log = logging.getLogger(f"rlearn.bench.table.{name}")
    log.propagate = False
    log.setLevel(logging.INFO)
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    log.addHandler(handler)
    return log


def main(logs: int = 2000, rounds: int = 8) -> None:
    compact = TableWriter(logger("compact"), width=120)
    grid_log = logger("grid")
    variants = {
        "compact (TableWriter)": lambda i: compact.write_scalars(SCALARS, 2000 + i, 3000 + i),
        "grid": lambda i: grid_log.info("train_iter %d\n%s", 2000 + i, grid_tables(SCALARS, 2000 + i, 3000 + i)),
    }
    times: Dict[str, List[float]] = {name: [] for name in variants}
    for r in range(rounds):
        for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            start = time.perf_counter()
            for i in range(logs):
                variants[name](i)
            times[name].append((time.perf_counter() - start) / logs * 1e6)
    lines = {"compact (TableWriter)": compact.last_table.count("\n") + 1,
             "grid": grid_tables(SCALARS, 2000, 3000).count("\n") + 2}
    base = statistics.median(times["grid"])
    rows = [[name, f"{statistics.median(t):.0f}", f"{statistics.median(t) / base:.2f}", lines[name]]
            for name, t in times.items()]
    print(tabulate(rows, headers=["layout", "us per log", "ratio to grid", "lines per log"]))


if __name__ == "__main__":
    main()
