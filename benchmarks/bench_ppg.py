"""PPG learning benchmark: CartPole-v1 and Pendulum-v1 learning curves, and CartPole side by side with SB3 PPO.

What it runs (every run in this process, one torch thread, seeds run one after the other):

* **PPG** through rlearn's run (rlearn.run) with the bundled configs ``ppg_cartpole`` and ``ppg_pendulum`` (log table
  to the log file, TensorBoard, final checkpoint: the product as a user runs it), evaluated with 10
  deterministic episodes every ``--eval-freq`` env steps. Targets: CartPole mean return >= 475 within 100,000
  env steps and Pendulum >= -250 within 200,000 env steps, on every seed.
* **SB3 PPO** on CartPole-v1 with rl-zoo's settings (8 envs, n_steps 32, batch 256, gae_lambda 0.8,
  gamma 0.98, 20 epochs, lr linearly decayed from 1e-3, clip range linearly decayed from 0.2, ent_coef 0),
  on the same budget with the same evaluation protocol (10 deterministic episodes every ``--eval-freq``
  steps). PPG and SB3 alternate seed by seed so both see the same machine load.

*Time to target* is training wall time until the first evaluation at or above the target, **excluding the
time spent evaluating** (the same for both libraries). *env steps/s* is env steps over training time. The
time breakdown splits PPG's training time into rollout collection, policy phase (GAE, PPO and value epochs),
auxiliary phase, and the rest (learner hooks: log tables, TensorBoard, run loop); SB3's into rollout
collection and training.

Outputs in ``benchmarks/results/``: ``ppg_<env>_learning.csv`` (one row per evaluation), ``ppg_<env>_learning.png``
(learning curves, drawn by ``rlearn plot`` from the runs' work dirs and SB3's reference runs through
``benchmarks/curves.py``) and ``ppg_bench.json`` (``ppg_bench_quick.json`` with ``--quick``).

    .venv/bin/python benchmarks/bench_ppg.py                       # 3 seeds, both envs (~15 min idle, 2 cores)
    .venv/bin/python benchmarks/bench_ppg.py --quick               # 1 seed, 30k / 60k steps (~2 min)
    .venv/bin/python benchmarks/bench_ppg.py --envs cartpole --seeds 0 1
    .venv/bin/python benchmarks/bench_ppg.py --envs pendulum --no-sb3

SB3 comes with the ``bench`` extra (``pip install -e '.[bench]'``). Timings on a shared
machine are noisy; read the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence


HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))
from curves import plot_learning_curves, write_reference_run  # noqa: E402  (benchmarks/curves.py)
from run_timing import attach, time_method  # noqa: E402
from sb3_ppo import EVAL_EPISODES, SB3_PPO_SETTINGS, fmt, run_sb3_ppo, summarise, write_csv  # noqa: E402

ENVS = {
    "cartpole": dict(config="ppg_cartpole", env_id="CartPole-v1", target=475.0, steps=100_000, quick_steps=30_000,
                     eval_freq=4096),
    "pendulum": dict(config="ppg_pendulum", env_id="Pendulum-v1", target=-250.0, steps=200_000, quick_steps=60_000,
                     eval_freq=8192),
}


# ------------------------------------------------------------------------------------------ PPG side
def run_ppg(env_key: str, seed: int, steps: int, eval_freq: int, runs_dir: Path,
            overrides: Sequence[str] = ()) -> Dict[str, Any]:
    """Train PPG with the bundled config through the run, in a work dir under ``runs_dir`` (kept for
    ``rlearn plot``); evaluation points, the time breakdown and ``work_dir``."""
    import torch

    from rlearn.config import load_config
    from rlearn.run import Trainer

    spec = ENVS[env_key]
    cfg = load_config(spec["config"], [f"seed={seed}", f"train.max_env_steps={steps}", f"eval.freq={eval_freq}",
                                       f"eval.episodes={EVAL_EPISODES}", "checkpoint.freq=none", *overrides])
    work_dir = runs_dir / f"ppg_{env_key}_s{seed}"

    trainer = Trainer(cfg, work_dir=work_dir, progress=False)
    hook = attach(trainer)
    # time the two phases of the policy
    timers: Dict[str, float] = {}
    time_method(trainer.policy, "_forward_learn", timers, "learn")
    time_method(trainer.policy, "_auxiliary_phase", timers, "aux")
    torch.set_num_threads(1)
    result = trainer.run()
    train_time = hook.train_time()
    breakdown = {
        "rollout": hook.collect,
        "policy_phase": timers["learn"] - timers["aux"],
        "aux_phase": timers["aux"],
        "other": train_time - hook.collect - timers["learn"],
    }
    run = summarise("rlearn PPG", env_key, seed, result.envstep, train_time, hook.points, breakdown, spec["target"])
    run["work_dir"] = work_dir
    return run


# ------------------------------------------------------------------------------------------ SB3 side
def run_sb3(seed: int, steps: int, eval_freq: int, runs_dir: Path) -> Dict[str, Any]:
    """SB3 PPO with rl-zoo's CartPole settings, evaluated like the PPG runs; its evaluations are written as a
    reference work dir under ``runs_dir`` (``work_dir``) for ``rlearn plot``."""
    run = run_sb3_ppo("SB3 PPO", "cartpole", "CartPole-v1", SB3_PPO_SETTINGS["cartpole"], seed, steps, eval_freq,
                      target=475.0, threads=1)
    run["work_dir"] = write_reference_run(runs_dir / f"sb3_ppo_cartpole_s{seed}", "sb3_ppo", seed,
                                          [(p["envstep"], p["eval_return"]) for p in run["points"]],
                                          times=[p["train_time"] for p in run["points"]])
    return run


# ----------------------------------------------------------------------------------------- reporting
def report(runs: List[Dict[str, Any]], env_key: str, budget: int) -> Dict[str, Any]:
    from tabulate import tabulate

    spec = ENVS[env_key]
    rows = []
    for run in runs:
        total = run["train_time"]
        parts = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in run["breakdown"].items())
        rows.append([run["library"], run["seed"], fmt(run["steps_to_target"], "d"), fmt(run["time_to_target"], ".1f"),
                     fmt(run["stable_from_steps"], "d"), fmt(run["stable_from_time"], ".1f"),
                     f"{run['env_steps_per_s']:.0f}", f"{total:.1f}", f"{run['final_return']:.1f}", parts])
    print(f"\n{spec['env_id']}: target {spec['target']:g} within {budget} env steps")
    print(tabulate(rows, headers=["library", "seed", "steps to target", "time to target (s)", "stable from (steps)",
                                  "stable from (s)", "env steps/s",
                                  "train time (s)", "final return", "where the time goes"]))
    summary: Dict[str, Any] = {}
    for library in sorted({r["library"] for r in runs}):
        mine = [r for r in runs if r["library"] == library]
        hits = [r for r in mine if r["steps_to_target"] is not None and r["steps_to_target"] <= budget]
        summary[library] = dict(
            seeds=[r["seed"] for r in mine], target_met_every_seed=len(hits) == len(mine),
            mean_time_to_target=statistics.mean(r["time_to_target"] for r in hits) if len(hits) == len(mine) else None,
            mean_steps_to_target=statistics.mean(r["steps_to_target"] for r in hits) if len(hits) == len(mine) else None,
            mean_env_steps_per_s=statistics.mean(r["env_steps_per_s"] for r in mine),
            mean_stable_from_time=statistics.mean(r["stable_from_time"] for r in mine)
            if all(r["stable_from_time"] is not None for r in mine) else None,
        )
        print(f"  {library}: target met on {len(hits)}/{len(mine)} seeds; mean env steps/s "
              f"{summary[library]['mean_env_steps_per_s']:.0f}; mean time to target "
              f"{fmt(summary[library]['mean_time_to_target'], '.1f')} s")
    ppg, sb3 = summary.get("rlearn PPG"), summary.get("SB3 PPO")
    if ppg and sb3 and ppg["mean_time_to_target"] and sb3["mean_time_to_target"]:
        ratio = ppg["mean_time_to_target"] / sb3["mean_time_to_target"]
        per_seed = [a["time_to_target"] / b["time_to_target"] for a in runs for b in runs
                    if a["library"] == "rlearn PPG" and b["library"] == "SB3 PPO" and a["seed"] == b["seed"]
                    and a["time_to_target"] and b["time_to_target"]]
        summary["time_to_target_ratio_ppg_over_sb3"] = ratio
        summary["per_seed_ratios"] = per_seed
        summary["steps_per_s_ratio_ppg_over_sb3"] = ppg["mean_env_steps_per_s"] / sb3["mean_env_steps_per_s"]
        print(f"  time to {spec['target']:g}: PPG / SB3 = {ratio:.2f}x (mean over seeds; per seed: "
              f"{', '.join(f'{x:.2f}' for x in per_seed)}); requirement <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'}")
        print(f"  env steps/s: PPG / SB3 = {summary['steps_per_s_ratio_ppg_over_sb3']:.2f}x")
        if ppg["mean_stable_from_time"] and sb3["mean_stable_from_time"]:
            summary["stable_time_ratio_ppg_over_sb3"] = ppg["mean_stable_from_time"] / sb3["mean_stable_from_time"]
            print(f"  time until every later evaluation is >= {spec['target']:g}: PPG / SB3 = "
                  f"{summary['stable_time_ratio_ppg_over_sb3']:.2f}x")
    return summary


# --------------------------------------------------------------------------------------------- main
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, 30k (CartPole) / 60k (Pendulum) env steps")
    parser.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=sorted(ENVS))
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="default: 0 1 2 (0 with --quick)")
    parser.add_argument("--no-sb3", action="store_true", help="skip the SB3 PPO comparison on CartPole")
    parser.add_argument("--steps", type=int, default=None, help="env steps per run (default: the target budget)")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config overrides for the PPG runs (as rlearn train --set), e.g. policy.n_pi=8")
    args = parser.parse_args(argv)
    os.environ.setdefault("RLEARN_NO_PROGRESS", "1")
    seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1, 2])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; python {sys.version.split()[0]}")

    summary: Dict[str, Any] = dict(quick=args.quick, seeds=seeds, overrides=args.set,
                                   started=time.strftime("%Y-%m-%d %H:%M:%S"))
    runs_dir = Path(tempfile.mkdtemp(prefix="bench_ppg_"))  # the runs' work dirs, until rlearn plot has read them
    try:
        _run_envs(args, seeds, runs_dir, summary)
    finally:
        shutil.rmtree(runs_dir, ignore_errors=True)
    summary["load_average_end"] = os.getloadavg()[0]
    name = "ppg_bench_quick.json" if args.quick else "ppg_bench.json"
    (args.out_dir / name).write_text(json.dumps(summary, indent=2, default=float))
    print(f"\nresults: {args.out_dir}/ (CSV, PNG, {name})")
    return 0


def _run_envs(args: argparse.Namespace, seeds: List[int], runs_dir: Path, summary: Dict[str, Any]) -> None:
    """Every requested env: the runs (PPG and SB3 alternating seed by seed), the CSV, the PNG, the report."""
    for env_key in args.envs:
        spec = ENVS[env_key]
        budget = spec["steps"]
        steps = args.steps or (spec["quick_steps"] if args.quick else budget)
        runs: List[Dict[str, Any]] = []
        for seed in seeds:
            run = run_ppg(env_key, seed, steps, spec["eval_freq"], runs_dir, args.set)
            runs.append(run)
            print(f"  {run['library']} {spec['env_id']} seed {seed}: steps to target "
                  f"{fmt(run['steps_to_target'], 'd')}, final return {run['final_return']:.1f}, "
                  f"{run['train_time']:.1f} s", flush=True)
            if env_key == "cartpole" and not args.no_sb3:
                run = run_sb3(seed, steps, spec["eval_freq"], runs_dir)
                runs.append(run)
                print(f"  {run['library']} {spec['env_id']} seed {seed}: steps to target "
                      f"{fmt(run['steps_to_target'], 'd')}, final return {run['final_return']:.1f}, "
                      f"{run['train_time']:.1f} s", flush=True)
        stem = f"ppg_{env_key}_learning" + ("_quick" if args.quick else "")
        write_csv(args.out_dir / f"{stem}.csv", runs)
        plot_learning_curves([r["work_dir"] for r in runs], args.out_dir / f"{stem}.png",
                             f"{spec['env_id']}: rlearn PPG" +
                             (" vs SB3 PPO (rl-zoo)" if env_key == "cartpole" and not args.no_sb3 else "") +
                             f" (target {spec['target']:g})")
        summary[env_key] = dict(steps=steps, budget=budget, target=spec["target"], report=report(runs, env_key, budget),
                                runs=[{k: v for k, v in r.items() if k not in ("points", "work_dir")} for r in runs])


if __name__ == "__main__":
    raise SystemExit(main())
