"""The experiment layer: a 10-seed PPO-vs-PPG CartPole report, and what ``rlearn sweep`` costs.

``compare``: ``rlearn sweep ppo_cartpole`` and ``rlearn sweep ppg_cartpole`` over the same seeds and budget,
then ``rlearn report`` over both; the report is copied to ``benchmarks/results/experiments_ppo_vs_ppg/``
with the sweeps' wall times (``timing.json``).

``timing``: the same seeds of ``ppo_cartpole`` three ways, in alternating order per round: each seed as a
plain ``rlearn train`` one after the other, ``rlearn sweep --jobs 1`` and ``rlearn sweep --jobs 2``. The
overhead of the experiment layer per run is (sweep --jobs 1 wall - plain runs' wall) / seeds.

    python benchmarks/bench_experiments.py compare --seeds 0-9 --steps 30000 --jobs 2
    python benchmarks/bench_experiments.py timing --seeds 0-3 --steps 4096 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

RESULTS = Path(__file__).resolve().parent / "results"


def rlearn(*args: str) -> float:
    """Run ``python -m rlearn ARGS``; its wall time in seconds (raises on a non-zero exit)."""
    return rlearn_timed(*args)[0]


def rlearn_timed(*args: str) -> Tuple[float, float]:
    """``(wall, cpu)`` seconds of ``python -m rlearn ARGS``: cpu is user + system time of the process and of
    every process it started and waited for (a sweep's runs), from ``wait4``."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen([sys.executable, "-m", "rlearn", *args], stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "RLEARN_NO_PROGRESS": "1"})
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            log.seek(0)
            raise RuntimeError(f"rlearn {' '.join(args)} exited with {status}:\n{log.read()[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def budget(steps: int) -> List[str]:
    return [f"train.max_env_steps={steps}", f"eval.freq={max(512, steps // 10)}"]


def compare(args: argparse.Namespace) -> None:
    out = Path(args.out)
    walls: Dict[str, float] = {}
    load_start = os.getloadavg()[0]
    for config in ("ppo_cartpole", "ppg_cartpole"):
        walls[config] = rlearn("sweep", config, "--seeds", args.seeds, "--jobs", str(args.jobs), "--out",
                               str(out / config), "--set", *budget(args.steps))
        print(f"{config}: {walls[config]:.1f} s", flush=True)
    report = RESULTS / "experiments_ppo_vs_ppg"
    report_s = rlearn("report", str(out / "ppo_cartpole"), str(out / "ppg_cartpole"), "-o", str(report),
                      "--reps", str(args.reps))
    (report / "timing.json").write_text(json.dumps({
        "seeds": args.seeds, "steps": args.steps, "jobs": args.jobs, "sweep_wall_s": walls, "report_wall_s": report_s,
        "load_average_start": load_start, "load_average_end": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, indent=1) + "\n")
    print((report / "report.md").read_text())


def timing(args: argparse.Namespace) -> None:
    from rlearn.experiments.sweep import parse_seeds

    seeds = parse_seeds(args.seeds)
    settings = ["--set", *budget(args.steps)]
    rounds = []
    for r in range(args.rounds):
        order = ["plain", "jobs1", "jobs2"] if r % 2 == 0 else ["jobs2", "jobs1", "plain"]
        walls: Dict[str, float] = {"load_average": os.getloadavg()[0]}
        with tempfile.TemporaryDirectory() as tmp:
            for way in order:
                if way == "plain":
                    times = [rlearn_timed("train", "ppo_cartpole", "--seed", str(s), "--work-dir", f"{tmp}/plain_{s}",
                                          "--no-progress", *settings) for s in seeds]
                    walls[way], walls[f"{way}_cpu"] = sum(t[0] for t in times), sum(t[1] for t in times)
                else:
                    walls[way], walls[f"{way}_cpu"] = rlearn_timed(
                        "sweep", "ppo_cartpole", "--seeds", args.seeds, "--jobs", way[-1], "--out", f"{tmp}/{way}",
                        "--no-progress", *settings)
                print(f"round {r}: {way} {walls[way]:.1f} s wall, {walls[f'{way}_cpu']:.1f} s cpu", flush=True)
        rounds.append(walls)
    summary = {
        "seeds": args.seeds, "steps": args.steps, "rounds": rounds, "cores": len(os.sched_getaffinity(0)),
        "overhead_per_run_wall_s": [(w["jobs1"] - w["plain"]) / len(seeds) for w in rounds],
        "overhead_per_run_cpu_s": [(w["jobs1_cpu"] - w["plain_cpu"]) / len(seeds) for w in rounds],
        "jobs1_over_jobs2": [w["jobs1"] / w["jobs2"] for w in rounds],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    out = RESULTS / "experiments_sweep_timing.json"
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("compare", help="10-seed PPO vs PPG sweeps and their report")
    p.add_argument("--seeds", default="0-9")
    p.add_argument("--steps", type=int, default=30_000)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--reps", type=int, default=10_000)
    p.add_argument("--out", default="experiments")
    p.set_defaults(func=compare)
    t = sub.add_parser("timing", help="plain runs vs sweep --jobs 1 vs --jobs 2")
    t.add_argument("--seeds", default="0-3")
    t.add_argument("--steps", type=int, default=4096)
    t.add_argument("--rounds", type=int, default=2)
    t.set_defaults(func=timing)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
