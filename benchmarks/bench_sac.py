"""SAC on Pendulum-v1: rlearn's ``sac_pendulum`` side by side with Stable-Baselines3's SAC, same settings.

For every seed, one full training run per library in a fresh process, the two libraries alternating (rlearn
first on even seeds, SB3 first on odd ones, so both see the same machine load on average). Seeds may run in
separate invocations side by side (``--runs-dir``), reported together with ``--merge``. Both train with
rl-baselines3-zoo's SAC Pendulum-v1 hyperparameters -- learning rate 1e-3 (actor, critics and temperature),
otherwise SB3's defaults: buffer 1,000,000, learning_starts 100, batch 256, tau 0.005, gamma 0.99, [256, 256],
``ent_coef="auto"`` (start 1.0, target entropy -1), one gradient step per env step -- for 20,000 env steps.
rlearn's ``policy_frequency = 2`` (CleanRL's delayed actor) makes the same number of actor updates as SB3.

Threads: by default each library runs as a user would run it (rlearn: the config's ``learn_threads = 2``
with the adaptive chooser, one thread outside train iterations; SB3: torch's default, both cores). With
``--threads 1`` both run with ``torch.set_num_threads(1)`` (rlearn: ``policy.learn_threads = none``): the same
CPU time comparison.

Every ``--eval-freq`` env steps the deterministic policy plays 10 episodes (rlearn: the pipeline's own
evaluation; SB3: rlearn's ``Evaluator`` on a 10-env vector through a ``predict`` adapter), left out of both
libraries' timings, so:

* **env steps/s** = env steps / training seconds; the ratio rlearn / SB3 per seed (paired runs) and its median;
* **time to target** = training seconds until the first evaluation with mean return >= -200 (and its env step);
* **final return** = the evaluation at the end, per seed.

Writes ``benchmarks/results/sac_pendulum_learning<suffix>.csv`` (one row per evaluation), ``.png`` (learning
curves drawn by ``rlearn plot`` through ``benchmarks/curves.py``) and ``sac_bench<suffix>.json`` (the summary,
with the machine's load averages).

    .venv/bin/python benchmarks/bench_sac.py                          # 3 seeds x 2 libraries x 20k steps
    .venv/bin/python benchmarks/bench_sac.py --threads 1 --suffix _1thread
    .venv/bin/python benchmarks/bench_sac.py --seeds 0 --steps 5000 --suffix _quick
    .venv/bin/python benchmarks/bench_sac.py --step --threads 1        # one gradient step each, one process
    # one process per seed, side by side, then one report:
    for s in 0 1 2; do .venv/bin/python benchmarks/bench_sac.py --seeds $s --suffix _s$s --runs-dir runs/sac & done; wait
    .venv/bin/python benchmarks/bench_sac.py --merge runs/sac/runs_s0.json runs/sac/runs_s1.json runs/sac/runs_s2.json

SB3 comes with the ``bench`` extra (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from curves import plot_learning_curves, write_reference_run  # noqa: E402

RESULTS = HERE / "results"
TARGET = -200.0
EVAL_EPISODES = 10

#: rl-zoo's SAC Pendulum-v1 hyperparameters (hyperparams/sac.yml: lr 1e-3, 20k steps), SB3's defaults otherwise
SB3_SETTINGS = dict(
    learning_rate=1e-3, buffer_size=1_000_000, learning_starts=100, batch_size=256, tau=0.005, gamma=0.99,
    train_freq=1, gradient_steps=1, ent_coef="auto", policy_kwargs=dict(net_arch=[256, 256]),
)


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


class _Curve:
    """Evaluation points ``(envstep, return, training seconds so far)``; evaluation time is not training time."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.eval_seconds = 0.0
        self.points: List[Dict[str, float]] = []

    def train_seconds(self) -> float:
        return time.perf_counter() - self.start - self.eval_seconds

    def record(self, envstep: int, evaluate: Any) -> Dict[str, float]:
        at = self.train_seconds()
        begin = time.perf_counter()
        result = evaluate()
        self.eval_seconds += time.perf_counter() - begin
        self.points.append(dict(envstep=int(envstep), return_mean=float(result["episode_return_mean"]), train_seconds=at))
        return result


def _summary(curve: _Curve, steps: int) -> Dict[str, Any]:
    hit = next((p for p in curve.points if p["return_mean"] >= TARGET), None)
    train_seconds = curve.train_seconds()
    return dict(
        steps=steps, train_seconds=train_seconds, env_steps_per_s=steps / train_seconds,
        final_return=curve.points[-1]["return_mean"] if curve.points else None,
        target_envstep=hit["envstep"] if hit else None, target_seconds=hit["train_seconds"] if hit else None,
        curve=curve.points,
    )


# ------------------------------------------------------------------------------------------ workers
def worker_rlearn(seed: int, steps: int, eval_freq: int, threads: Optional[int], work_dir: str) -> Dict[str, Any]:
    """Train ``sac_pendulum`` through the pipeline (log table, TensorBoard, checkpoints) in ``work_dir``,
    evaluating every ``eval_freq`` env steps and at the end."""
    import torch

    from rlearn.config import load_config
    from rlearn.run import Trainer

    overrides = [f"seed={seed}", f"train.max_env_steps={steps}", f"eval.freq={eval_freq}",
                 f"eval.episodes={EVAL_EPISODES}", "checkpoint.freq=none"]
    if threads is not None:
        torch.set_num_threads(threads)
        overrides += [f"num_threads={threads}", "policy.learn_threads=none"]
    cfg = load_config("sac_pendulum", overrides=overrides)
    curve = _Curve()
    pipeline = Trainer(cfg, work_dir=work_dir, progress=False)
    evaluate = pipeline.evaluator.evaluate
    pipeline.evaluator.evaluate = lambda: curve.record(pipeline.envstep, evaluate)  # time it, out of training
    result = pipeline.run()
    out = _summary(curve, result.envstep)
    out["train_iter"] = result.train_iter
    return out


class _SB3Deterministic:
    """SB3's model behind rlearn's ``_forward_eval`` contract, so both libraries are evaluated the same way."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        return self.model.predict(obs, deterministic=True)[0]


def worker_sb3(seed: int, steps: int, eval_freq: int, threads: Optional[int], work_dir: str) -> Dict[str, Any]:
    """Train SB3 SAC with the same settings, evaluating every ``eval_freq`` env steps and at the end."""
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    from rlearn.collect import Evaluator
    from rlearn.env import make_vector_env

    if threads is not None:
        torch.set_num_threads(threads)
    eval_env = make_vector_env("Pendulum-v1", EVAL_EPISODES, seed=10_000 + seed)
    curve = _Curve()

    class EvalEvery(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.evaluator: Optional[Evaluator] = None

        def _on_step(self) -> bool:
            if self.num_timesteps % eval_freq == 0:
                curve.record(self.num_timesteps, self._evaluator().evaluate)
            return True

        def _evaluator(self) -> Evaluator:
            if self.evaluator is None:
                self.evaluator = Evaluator(eval_env, _SB3Deterministic(self.model), EVAL_EPISODES, seed=20_000 + seed)
            return self.evaluator

    callback = EvalEvery()
    model = SAC("MlpPolicy", "Pendulum-v1", seed=seed, device="cpu", verbose=0, **SB3_SETTINGS)
    model.learn(total_timesteps=steps, callback=callback)
    if not curve.points or curve.points[-1]["envstep"] != model.num_timesteps:
        curve.record(model.num_timesteps, callback._evaluator().evaluate)  # the final evaluation
    eval_env.close()
    return _summary(curve, int(model.num_timesteps))


WORKERS = {"rlearn": worker_rlearn, "sb3": worker_sb3}


def step_comparison(threads: int, rounds: int = 8, iters: int = 30) -> Dict[str, Any]:
    """One gradient step of each library on the same Pendulum minibatch shapes, in one process, alternating
    blocks of ``iters`` steps for ``rounds`` rounds (rlearn's ``_forward_learn`` with ``policy_frequency``
    2 against SB3's ``train(gradient_steps=iters)``), both on ``threads`` torch threads: the learner's cost
    without collection. Returns the medians and the median of the per-round ratios."""
    import torch
    from stable_baselines3 import SAC

    from policies.sac import SACPolicy

    torch.set_num_threads(threads)
    model = SAC("MlpPolicy", "Pendulum-v1", seed=0, device="cpu", verbose=0, **{**SB3_SETTINGS, "learning_starts": 0})
    model.learn(300)  # fills the buffer a little and builds the optimizers' state
    policy = SACPolicy(dict(lr_actor=1e-3, lr_critic=1e-3, lr_alpha=1e-3), model.observation_space,
                       model.action_space, seed=0)
    gen = torch.Generator().manual_seed(0)
    batch = dict(obs=torch.randn(256, 3, generator=gen), action=torch.rand(256, 1, generator=gen) * 2 - 1,
                 reward=-torch.rand(256, generator=gen), next_obs=torch.randn(256, 3, generator=gen),
                 terminated=torch.zeros(256))
    for _ in range(20):
        policy._forward_learn(batch)
    ours, theirs = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            info = policy._forward_learn(batch)
            [float(value) for value in info.values()]  # read on the host, as the monitor does
        ours.append((time.perf_counter() - start) / iters)
        start = time.perf_counter()
        model.train(gradient_steps=iters, batch_size=256)
        theirs.append((time.perf_counter() - start) / iters)
    ratios = [b / a for a, b in zip(ours, theirs)]
    return dict(threads=threads, rlearn_ms=statistics.median(ours) * 1e3, sb3_ms=statistics.median(theirs) * 1e3,
                median_ratio=statistics.median(ratios), ratio_range=[min(ratios), max(ratios)], load=_load())


def run_worker(kind: str, **kwargs: Any) -> Dict[str, Any]:
    """One training run in a fresh Python process (no shared caches or threads between runs)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--worker-args", json.dumps(kwargs)]
    env = dict(os.environ, RLEARN_NO_PROGRESS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -------------------------------------------------------------------------------------------- report
def write_outputs(runs: List[Dict[str, Any]], out: Path, suffix: str, tmp: Path, title: str) -> None:
    """The CSV (one row per evaluation) and the PNG: rlearn's own work dirs plus SB3's curves written as
    reference work dirs, drawn by one ``rlearn plot`` call."""
    with open(out / f"sac_pendulum_learning{suffix}.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["library", "seed", "envstep", "return_mean", "train_seconds"])
        for run in runs:
            for p in run["curve"]:
                writer.writerow([run["library"], run["seed"], p["envstep"], p["return_mean"], f"{p['train_seconds']:.3f}"])
    dirs = []
    for run in runs:
        if run["library"] == "rlearn":
            dirs.append(Path(run["work_dir"]))
        else:
            points = [(p["envstep"], p["return_mean"]) for p in run["curve"]]
            times = [p["train_seconds"] for p in run["curve"]]
            dirs.append(write_reference_run(tmp / f"sb3_seed{run['seed']}", "sb3_sac", run["seed"], points, times))
    plot_learning_curves(dirs, out / f"sac_pendulum_learning{suffix}.png", title)


def _report(runs: List[Dict[str, Any]], threads_arg: Optional[int], loads: List[str], steps: int, out: Path,
            suffix: str, tmp: Path) -> None:
    """The per-seed table, the median ratio, the CSV, the PNG and the summary JSON of ``runs``."""
    from tabulate import tabulate

    by = {(r["library"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    rows, ratios = [], []
    for seed in seeds:
        mine, theirs = by[("rlearn", seed)], by[("sb3", seed)]
        ratio = mine["env_steps_per_s"] / theirs["env_steps_per_s"]
        ratios.append(ratio)
        rows.append([seed, mine["env_steps_per_s"], theirs["env_steps_per_s"], ratio,
                     mine["target_envstep"], mine["target_seconds"], theirs["target_envstep"],
                     theirs["target_seconds"], mine["final_return"], theirs["final_return"]])
    headers = ["seed", "rlearn steps/s", "SB3 steps/s", "ratio", "rlearn target step", "rlearn target s",
               "SB3 target step", "SB3 target s", "rlearn final", "SB3 final"]
    print(tabulate(rows, headers=headers, floatfmt=".4g"))
    median = float(statistics.median(ratios))
    threads = "one thread each" if threads_arg == 1 else (
        f"{threads_arg} threads each" if threads_arg else "default threads")
    print(f"median env steps/s ratio rlearn / SB3: {median:.2f}x over {len(ratios)} paired runs ({threads}); "
          f"load averages {loads}")
    write_outputs(runs, out, suffix, tmp, f"SAC Pendulum-v1, rl-zoo settings, {threads}: rlearn vs SB3")
    summary = dict(steps=steps, seeds=seeds, threads=threads_arg, median_ratio=median, ratios=ratios, loads=loads,
                   runs=[{k: v for k, v in r.items() if k not in ("curve", "work_dir")} for r in runs])
    (out / f"sac_bench{suffix}.json").write_text(json.dumps(summary, indent=1))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--eval-freq", type=int, default=2_000)
    parser.add_argument("--threads", type=int, default=None, help="torch threads for both libraries (default: "
                        "each library's own: rlearn's config, SB3's torch default)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--suffix", default="", help="appended to the result file names (e.g. _quick)")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="keep the runs here (rlearn work dirs and a runs_<suffix>.json with every curve) instead "
                             "of a temporary dir; --merge reads them back")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="runs_*.json files of earlier invocations (e.g. one per seed, run side by side): report "
                             "them together instead of training")
    parser.add_argument("--step", action="store_true",
                        help="only compare one gradient step of each library in one process (alternating blocks, "
                             "on --threads threads, default 1); writes sac_step<suffix>.json")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--worker-args", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(WORKERS[args.worker](**json.loads(args.worker_args))))
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    if args.step:
        result = step_comparison(args.threads or 1)
        print(f"one gradient step, {result['threads']} thread(s): rlearn {result['rlearn_ms']:.2f} ms, SB3 "
              f"{result['sb3_ms']:.2f} ms, SB3 / rlearn {result['median_ratio']:.2f}x (rounds "
              f"{result['ratio_range'][0]:.2f}-{result['ratio_range'][1]:.2f}x); load {result['load']}")
        (args.out / f"sac_step{args.suffix}.json").write_text(json.dumps(result, indent=1))
        return 0
    if args.merge:
        parts = [json.loads(path.read_text()) for path in args.merge]
        runs = [run for part in parts for run in part["runs"]]
        loads = [load for part in parts for load in part["loads"]]
        tmp = Path(tempfile.mkdtemp(prefix="bench_sac_merge_"))
        try:
            _report(runs, parts[0]["threads"], loads, parts[0]["steps"], args.out, args.suffix, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return 0

    keep = args.runs_dir is not None
    tmp = args.runs_dir if keep else Path(tempfile.mkdtemp(prefix="bench_sac_"))
    tmp.mkdir(parents=True, exist_ok=True)
    runs: List[Dict[str, Any]] = []
    loads = [_load()]
    try:
        for seed in args.seeds:
            order = ["rlearn", "sb3"] if seed % 2 == 0 else ["sb3", "rlearn"]  # alternating by seed
            for kind in order:
                work_dir = str(tmp / f"{kind}_seed{seed}{args.suffix}")
                run = run_worker(kind, seed=seed, steps=args.steps, eval_freq=args.eval_freq, threads=args.threads,
                                 work_dir=work_dir)
                run.update(library=kind, seed=seed, load_after=_load(), work_dir=work_dir)
                loads.append(run["load_after"])
                runs.append(run)
                print(f"{kind:6s} seed {seed}: {run['env_steps_per_s']:.1f} env steps/s, final return "
                      f"{run['final_return']:.1f}, target at {run['target_envstep']} env steps "
                      f"({run['target_seconds'] and round(run['target_seconds'], 1)} s); load {run['load_after']}",
                      flush=True)
                if keep:  # everything --merge needs, after every run
                    (tmp / f"runs{args.suffix}.json").write_text(json.dumps(
                        dict(steps=args.steps, threads=args.threads, loads=loads, runs=runs), indent=1))
        _report(runs, args.threads, loads, args.steps, args.out, args.suffix, tmp)
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
