"""PPO benchmark: rlearn's PPO side by side with Stable-Baselines3's PPO at rl-zoo's settings, same script.

For every seed, rlearn PPO (the bundled ``ppo_cartpole`` / ``ppo_pendulum`` configs through the pipeline:
log file, TensorBoard, the product as a user runs it) and SB3 PPO with the same hyper-parameters train on the
same budget, one after the other, the order alternating from seed to seed (rlearn first on even seeds, SB3
first on odd ones) so that both see the same machine load. Both are evaluated the same way: 10 deterministic
episodes every ``eval_freq`` env steps, evaluation time excluded from the training time.

Reported per run: env steps/s (env steps / training time), steps and time to the target (first evaluation at or
above it), the final evaluation return; per seed, the speed ratio rlearn / SB3 of the pair. Targets:
CartPole-v1 mean return 500 within 100k env steps and Pendulum-v1 >= -250 within 200k on every seed; env
steps/s >= 1.5x SB3.

Settings (rl-baselines3-zoo ``hyperparams/ppo.yml``):

* CartPole-v1: 8 envs, n_steps 32, batch 256, 20 epochs, gamma 0.98, gae_lambda 0.8, ent_coef 0, lr and clip
  range decayed linearly from 1e-3 and 0.2 (``lin_1e-3``, ``lin_0.2``).
* Pendulum-v1: 4 envs, n_steps 1024, batch 64, 10 epochs, gamma 0.9, gae_lambda 0.95, ent_coef 0, lr 1e-3,
  clip range 0.2. rl-zoo adds ``use_sde=True``; rlearn's PPO has no gSDE, so **both** run with
  ``use_sde=False`` here (same exploration model: state-independent log-std).

Both libraries: value_coef 0.5, max_grad_norm 0.5, advantage normalisation, Adam, separate 64-64 tanh actor
and critic, one torch thread (``--threads N``: N in both). Outputs in ``benchmarks/results/``: ``ppo_<env>_learning.csv`` (one row per
evaluation), ``ppo_<env>_learning.png`` (learning curves, by ``rlearn plot``) and ``ppo_bench.json`` (``_quick`` with ``--quick``).

    .venv/bin/python benchmarks/bench_ppo.py                          # 3 seeds, both envs
    .venv/bin/python benchmarks/bench_ppo.py --envs cartpole --seeds 0 1 2
    .venv/bin/python benchmarks/bench_ppo.py --quick                  # 1 seed, 30k / 60k steps
    .venv/bin/python benchmarks/bench_ppo.py --envs pendulum --seeds 0 --no-sb3

Learning-curve PNGs are drawn by ``rlearn plot`` (benchmarks/curves.py) from the runs' work dirs (kept in a
temporary directory until the plot is drawn). SB3 and matplotlib come with the ``bench`` extra (``pip install -e '.[bench]'``). Timings on a shared machine
are noisy: read the per-pair ratios.
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
sys.path.insert(0, str(HERE))
from curves import plot_learning_curves, write_reference_run  # noqa: E402
from run_timing import attach, time_method  # noqa: E402
from sb3_ppo import EVAL_EPISODES, SB3_PPO_SETTINGS, fmt, run_sb3_ppo, summarise, write_csv  # noqa: E402

RESULTS = HERE / "results"
RLEARN, SB3 = "rlearn PPO", "SB3 PPO"
THREADS = [1]  #: torch threads of both libraries (--threads)

ENVS = {
    "cartpole": dict(config="ppo_cartpole", env_id="CartPole-v1", target=500.0, steps=100_000, quick_steps=30_000,
                     eval_freq=4096, sb3=SB3_PPO_SETTINGS["cartpole"]),
    "pendulum": dict(config="ppo_pendulum", env_id="Pendulum-v1", target=-250.0, steps=200_000, quick_steps=60_000,
                     eval_freq=8192, sb3=SB3_PPO_SETTINGS["pendulum"]),
}


# --------------------------------------------------------------------------------------- rlearn side
def run_rlearn(env_key: str, seed: int, steps: int, overrides: Sequence[str] = (),
               work_dir: Optional[Path] = None) -> Dict[str, Any]:
    """Train rlearn PPO with the bundled config through the pipeline; evaluation points and the time breakdown
    (rollout collection, PPO updates, the rest: learner hooks and the pipeline). ``work_dir`` (replaced if it
    exists) keeps the run's files for ``rlearn plot``; None: a temporary one, deleted afterwards."""
    import torch

    from rlearn.config import load_config
    from rlearn.run import Trainer

    spec = ENVS[env_key]
    cfg = load_config(spec["config"], [f"seed={seed}", f"num_threads={THREADS[0]}", f"train.max_env_steps={steps}",
                                       f"eval.freq={spec['eval_freq']}", f"eval.episodes={EVAL_EPISODES}",
                                       "checkpoint.freq=none", *overrides])
    if spec["sb3"]["decay"]:  # stretch the linear lr decay over this run's updates, as SB3's schedule does
        per_update = cfg["env"]["num_envs"] * cfg["policy"]["rollout_steps"]
        for hook in cfg["learner"]["hooks"]:
            if hook["type"] == "LRSchedulerHook":
                hook["scheduler"]["total_iters"] = -(-steps // per_update)
    keep = work_dir is not None
    if keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    else:
        work_dir = Path(tempfile.mkdtemp(prefix=f"bench_ppo_{env_key}_"))
    try:
        pipe = Trainer(cfg, work_dir=work_dir, progress=False)
        hook = attach(pipe)
        timers: Dict[str, float] = {}
        time_method(pipe.policy, "_forward_learn", timers, "update")
        torch.set_num_threads(THREADS[0])
        result = pipe.run()
    finally:
        if not keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    train_time = hook.train_time()
    breakdown = {"rollout": hook.collect, "update": timers["update"],
                 "other": train_time - hook.collect - timers["update"]}
    run = summarise(RLEARN, env_key, seed, result.envstep, train_time, hook.points, breakdown, spec["target"])
    run["work_dir"] = str(work_dir) if keep else None
    return run


# ------------------------------------------------------------------------------------------ SB3 side
def run_sb3(env_key: str, seed: int, steps: int) -> Dict[str, Any]:
    """SB3 PPO with the same rl-zoo settings, evaluated like the rlearn runs."""
    spec = ENVS[env_key]
    return run_sb3_ppo(SB3, env_key, spec["env_id"], spec["sb3"], seed, steps, spec["eval_freq"], spec["target"],
                       threads=THREADS[0])


# ----------------------------------------------------------------------------------------- reporting
def plot(path: Path, runs: List[Dict[str, Any]], env_key: str, title: str, runs_root: Path) -> Optional[Path]:
    """Learning curves through ``rlearn plot``: the rlearn runs' own work dirs, and each SB3 run written as a
    reference work dir (:func:`curves.write_reference_run`) under ``runs_root``; one line per library, with
    its seed band."""
    dirs: List[Path] = []
    for run in runs:
        if run["library"] == RLEARN and run.get("work_dir"):
            dirs.append(Path(run["work_dir"]))
        elif run["library"] == SB3:
            points = [(p["envstep"], p["eval_return"]) for p in run["points"]]
            dirs.append(write_reference_run(runs_root / f"sb3_ppo_{env_key}_s{run['seed']}",
                                            f"sb3_ppo_{env_key}", run["seed"], points,
                                            times=[p["train_time"] for p in run["points"]]))
    return plot_learning_curves(dirs, path, title) if dirs else None


def report(runs: List[Dict[str, Any]], env_key: str, budget: int) -> Dict[str, Any]:
    """Print the per-run table and the per-pair speed ratios; return the summary."""
    from tabulate import tabulate

    spec = ENVS[env_key]
    rows = []
    for run in runs:
        total = run["train_time"]
        parts = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in run["breakdown"].items())
        rows.append([run["library"], run["seed"], fmt(run["steps_to_target"], "d"), fmt(run["time_to_target"], ".1f"),
                     f"{run['env_steps_per_s']:.0f}", f"{total:.1f}", f"{run['final_return']:.1f}",
                     f"{run['load_before']:.1f}", parts])
    print(f"\n{spec['env_id']}: target {spec['target']:g} within {budget} env steps")
    print(tabulate(rows, headers=["library", "seed", "steps to target", "time to target (s)", "env steps/s",
                                  "train time (s)", "final return", "load avg", "where the time goes"]))
    summary: Dict[str, Any] = {}
    for library in (RLEARN, SB3):
        mine = [r for r in runs if r["library"] == library]
        if not mine:
            continue
        hits = [r for r in mine if r["steps_to_target"] is not None and r["steps_to_target"] <= budget]
        summary[library] = dict(
            seeds=[r["seed"] for r in mine], target_met_every_seed=len(hits) == len(mine),
            steps_to_target=[r["steps_to_target"] for r in mine], final_return=[r["final_return"] for r in mine],
            env_steps_per_s=[r["env_steps_per_s"] for r in mine],
        )
        print(f"  {library}: target met on {len(hits)}/{len(mine)} seeds; env steps/s "
              f"{', '.join(f'{x:.0f}' for x in summary[library]['env_steps_per_s'])}")
    pairs = [(a, b) for a in runs for b in runs
             if a["library"] == RLEARN and b["library"] == SB3 and a["seed"] == b["seed"]]
    if pairs:
        ratios = [a["env_steps_per_s"] / b["env_steps_per_s"] for a, b in pairs]
        update_ratios = [b["breakdown"]["update"] / a["breakdown"]["update"] for a, b in pairs]
        rollout_ratios = [b["breakdown"]["rollout"] / a["breakdown"]["rollout"] for a, b in pairs]
        summary["speed_ratio_per_seed"] = ratios
        summary["speed_ratio_median"] = statistics.median(ratios)
        summary["update_time_ratio_sb3_over_rlearn"] = update_ratios
        summary["rollout_time_ratio_sb3_over_rlearn"] = rollout_ratios
        print(f"  env steps/s, rlearn / SB3 per seed: {', '.join(f'{x:.2f}x' for x in ratios)} "
              f"(median {summary['speed_ratio_median']:.2f}x; target >= 1.5x: "
              f"{'met' if summary['speed_ratio_median'] >= 1.5 else 'NOT met'})")
        print(f"  updates SB3 / rlearn: {', '.join(f'{x:.2f}x' for x in update_ratios)}; "
              f"rollouts SB3 / rlearn: {', '.join(f'{x:.2f}x' for x in rollout_ratios)}")
    return summary


# --------------------------------------------------------------------------------------------- main
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, 30k (CartPole) / 60k (Pendulum) env steps")
    parser.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=sorted(ENVS))
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="default: 0 1 2 (0 with --quick)")
    parser.add_argument("--no-sb3", action="store_true", help="rlearn only")
    parser.add_argument("--steps", type=int, default=None, help="env steps per run (default: the target budget)")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of both libraries (default 1: the same-CPU-time comparison)")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config overrides for the rlearn runs (as rlearn train --set)")
    args = parser.parse_args(argv)
    os.environ.setdefault("RLEARN_NO_PROGRESS", "1")
    THREADS[0] = args.threads
    seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1, 2])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; python {sys.version.split()[0]}")

    summary: Dict[str, Any] = dict(quick=args.quick, seeds=seeds, overrides=args.set, torch_threads=args.threads,
                                   started=time.strftime("%Y-%m-%d %H:%M:%S"), load_average_start=os.getloadavg()[0])
    runs_root = Path(tempfile.mkdtemp(prefix="bench_ppo_runs_"))  # work dirs for rlearn plot, deleted at the end
    for env_key in args.envs:
        spec = ENVS[env_key]
        budget = spec["steps"]
        steps = args.steps or (spec["quick_steps"] if args.quick else budget)
        runs: List[Dict[str, Any]] = []
        for seed in seeds:
            order = [RLEARN] if args.no_sb3 else ([RLEARN, SB3] if seed % 2 == 0 else [SB3, RLEARN])
            for library in order:
                load = os.getloadavg()[0]
                run_dir = runs_root / f"rlearn_ppo_{env_key}_s{seed}"
                run = (run_rlearn(env_key, seed, steps, args.set, work_dir=run_dir) if library == RLEARN
                       else run_sb3(env_key, seed, steps))
                run["load_before"] = load
                runs.append(run)
                print(f"  {library} {spec['env_id']} seed {seed}: steps to target {fmt(run['steps_to_target'], 'd')}, "
                      f"final return {run['final_return']:.1f}, {run['env_steps_per_s']:.0f} env steps/s, "
                      f"{run['train_time']:.1f} s (load {load:.1f})", flush=True)
        stem = f"ppo_{env_key}_learning" + ("_quick" if args.quick else "")
        write_csv(args.out_dir / f"{stem}.csv", runs)
        plot(args.out_dir / f"{stem}.png", runs, env_key, f"{spec['env_id']}: rlearn PPO" +
             ("" if args.no_sb3 else " vs SB3 PPO (rl-zoo settings)"), runs_root)
        summary[env_key] = dict(steps=steps, budget=budget, target=spec["target"], report=report(runs, env_key, budget),
                                runs=[{k: v for k, v in r.items() if k != "points"} for r in runs])
    shutil.rmtree(runs_root, ignore_errors=True)
    summary["load_average_end"] = os.getloadavg()[0]
    name = "ppo_bench_quick.json" if args.quick else "ppo_bench.json"
    path = args.out_dir / name
    # one file for both environments: a run of one of them keeps the other's last results (with their own
    # run metadata under "<env>_run")
    merged: Dict[str, Any] = {}
    if path.exists():
        try:
            merged = json.loads(path.read_text())
        except ValueError:
            merged = {}
    for env_key in args.envs:
        merged[env_key] = summary[env_key]
        merged[f"{env_key}_run"] = {k: v for k, v in summary.items() if k not in ENVS}
    path.write_text(json.dumps(merged, indent=2, default=float))
    print(f"\nresults: {args.out_dir}/ (CSV, PNG, {name})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
