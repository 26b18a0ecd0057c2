"""rlearn against Stable-Baselines3 on MuJoCo at rl-baselines3-zoo's settings: TD3, SAC and PPO on HalfCheetah-v5
and Hopper-v5, whole processes, alternating, at default threads and at one thread.

Each run is a fresh Python process training ``--steps`` env steps (default 20,000; the off-policy ones start
learning after ``--learning-starts``, default 10,000: the zoo's value) with one library. rlearn runs its bundled
config (``td3_halfcheetah``, ``sac_hopper``...), SB3 the same settings translated by :func:`sb3_kwargs` (the
zoo's; PPO without ``VecNormalize`` on both sides, which rlearn has not). For every (algorithm, task, threads)
there are ``--pairs`` pairs; the first library alternates from pair to pair, so both see the same load on average.

Threads: ``default`` is how each library runs out of the box (rlearn: the config's, i.e. ``num_threads = 1`` and
``learn_threads = 2`` with the adaptive chooser for TD3/SAC; SB3: torch's default, one per core); ``1`` runs both
with ``torch.set_num_threads(1)`` (rlearn: ``num_threads=1 policy.learn_threads=none``): the same CPU time.

Timed: the training seconds inside each process (rlearn's ``Trainer.run`` minus its final evaluation, SB3's
``learn``), their CPU time (all threads; less sensitive to other processes on a shared machine), and the
whole process's wall time (imports and setup included). Ratio = SB3 seconds / rlearn seconds
(> 1: rlearn is faster). The load average is printed before and after every run; on a shared machine a pair
whose load changed is noisy, so read the median of several pairs.

    .venv/bin/python benchmarks/bench_mujoco_vs_sb3.py                                   # everything, 20k steps, 3 pairs
    .venv/bin/python benchmarks/bench_mujoco_vs_sb3.py --steps 4000 --learning-starts 2000 --pairs 1 --envs halfcheetah --suffix _quick
    .venv/bin/python benchmarks/bench_mujoco_vs_sb3.py --algos sac --threads 1 --pairs 5

Prints one line per run, the per-pair ratios and a summary (median ratio per algorithm, task and threads), and
writes ``benchmarks/results/mujoco_vs_sb3<suffix>.json``. Needs the ``mujoco`` and ``bench`` extras.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ENV_IDS = {"halfcheetah": "HalfCheetah-v5", "hopper": "Hopper-v5"}
ALGOS = ("td3", "sac", "ppo")
LIBRARIES = ("rlearn", "sb3")


def load() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


# ------------------------------------------------------------------------------------- pure helpers
def sb3_kwargs(policy: Mapping[str, Any], learning_starts: int) -> Dict[str, Any]:
    """SB3's constructor arguments for the rlearn ``policy`` config section (a bundled MuJoCo config): the same
    hyperparameters in SB3's names (TD3's exploration noise is built by the worker from ``noise_std``)."""
    algo = policy["type"]
    if algo in ("td3", "sac"):
        out: Dict[str, Any] = dict(learning_starts=learning_starts, batch_size=policy["batch_size"], gamma=policy["gamma"],
                                   tau=policy["tau"], buffer_size=1_000_000, train_freq=1, gradient_steps=1,
                                   policy_kwargs=dict(net_arch=list(policy["hidden_sizes"])))
        if algo == "td3":
            assert policy["lr_actor"] == policy["lr_critic"], "SB3 has one learning rate"
            out.update(learning_rate=policy["lr_actor"], policy_delay=policy["actor_update_freq"],
                       target_policy_noise=policy["target_noise"], target_noise_clip=policy["target_noise_clip"],
                       noise_std=policy["exploration_noise"])
        else:
            out.update(learning_rate=policy["lr_critic"], ent_coef="auto")
        return out
    if algo == "ppo":
        return dict(n_steps=policy["rollout_steps"], batch_size=policy["minibatch_size"], n_epochs=policy["epochs"],
                    gamma=policy["gamma"], gae_lambda=policy["gae_lambda"], learning_rate=policy["lr"],
                    clip_range=policy["clip_ratio"], ent_coef=policy["entropy_coef"], vf_coef=policy["value_coef"],
                    max_grad_norm=policy["max_grad_norm"],
                    policy_kwargs=dict(log_std_init=policy["init_log_std"], ortho_init=False,
                                       activation=policy["activation"],
                                       net_arch=dict(pi=list(policy["hidden_sizes"]), vf=list(policy["hidden_sizes"]))))
    raise ValueError(f"no SB3 translation for policy type {algo!r}")


def run_order(pair: int) -> List[str]:
    """Which library runs first in pair ``pair``: rlearn in even pairs, SB3 in odd ones."""
    return list(LIBRARIES) if pair % 2 == 0 else list(reversed(LIBRARIES))


def pair_ratios(runs: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """One row per complete pair of ``runs`` (dicts with ``library``, ``algo``, ``env``, ``threads``, ``pair``,
    ``train_seconds``, ``process_seconds``, ``load_before``, ``load_after``): SB3 seconds / rlearn seconds, for
    the training and for the whole process, with the loads the pair ran at. Incomplete pairs are left out."""
    by_pair: Dict[tuple, Dict[str, Mapping[str, Any]]] = {}
    for run in runs:
        by_pair.setdefault((run["algo"], run["env"], str(run["threads"]), run["pair"]), {})[run["library"]] = run
    rows = []
    for (algo, env, threads, pair), libs in sorted(by_pair.items()):
        if set(libs) != set(LIBRARIES):
            continue
        ours, theirs = libs["rlearn"], libs["sb3"]
        loads = [run[key] for run in (ours, theirs) for key in ("load_before", "load_after")]
        rows.append(dict(algo=algo, env=env, threads=threads, pair=pair,
                         rlearn_s=ours["train_seconds"], sb3_s=theirs["train_seconds"],
                         ratio=theirs["train_seconds"] / ours["train_seconds"],
                         process_ratio=theirs["process_seconds"] / ours["process_seconds"],
                         cpu_ratio=(theirs["train_cpu_seconds"] / ours["train_cpu_seconds"]
                                    if "train_cpu_seconds" in ours and "train_cpu_seconds" in theirs else None),
                         load_1min=[float(text.split()[0]) for text in loads if text != "?"]))
    return rows


def summarise(rows: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Per (algorithm, task, threads): the number of pairs, the median, lowest and highest training ratio, the
    median whole-process ratio, the median CPU-time ratio (None where the runs did not record it) and the range
    of the 1-minute load averages seen."""
    groups: Dict[tuple, List[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["algo"], row["env"], row["threads"]), []).append(row)
    out = []
    for (algo, env, threads), members in sorted(groups.items()):
        ratios = [row["ratio"] for row in members]
        loads = [value for row in members for value in row["load_1min"]]
        cpu = [row["cpu_ratio"] for row in members if row.get("cpu_ratio") is not None]
        out.append(dict(algo=algo, env=env, threads=threads, pairs=len(members), median=statistics.median(ratios),
                        low=min(ratios), high=max(ratios),
                        process_median=statistics.median(row["process_ratio"] for row in members),
                        cpu_median=statistics.median(cpu) if cpu else None,
                        load_low=min(loads) if loads else None, load_high=max(loads) if loads else None))
    return out


def summary_line(entry: Mapping[str, Any]) -> str:
    """One summary entry as the line the script prints."""
    loads = "?" if entry["load_low"] is None else f"{entry['load_low']:.1f}-{entry['load_high']:.1f}"
    return (f"{entry['algo'].upper():3s} {entry['env']:11s} threads={entry['threads']:7s} SB3/rlearn "
            f"{entry['median']:.2f}x (pairs {entry['pairs']}: {entry['low']:.2f}-{entry['high']:.2f}x; whole process "
            f"{entry['process_median']:.2f}x" + (f"; CPU time {entry['cpu_median']:.2f}x" if entry.get("cpu_median")
                                                 else "") + f"), load {loads}")


# ------------------------------------------------------------------------------------------ workers
def worker_rlearn(algo: str, env: str, steps: int, learning_starts: int, threads: Optional[int], seed: int,
                  work_dir: str) -> Dict[str, Any]:
    """Train the bundled ``<algo>_<env>`` config for ``steps`` env steps (no evaluation but the run's final one,
    whose time is left out; no periodic checkpoints)."""
    import logging

    from rlearn.config import load_config
    from rlearn.run import Trainer

    overrides = [f"seed={seed}", f"train.max_env_steps={steps}", "eval.freq=none", "eval.episodes=1",
                 "eval.num_envs=1", "checkpoint.freq=none"]
    if algo != "ppo":
        overrides.append(f"policy.learning_starts={learning_starts}")
    if threads is not None:
        overrides.append(f"num_threads={threads}")
        if algo != "ppo":
            overrides.append("policy.learn_threads=none")
    cfg = load_config(f"{algo}_{env}", overrides=overrides)
    pipeline = Trainer(cfg, work_dir=work_dir, progress=False)
    for handler in pipeline.logger.handlers:  # the tables go to the run's log file only
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.WARNING)
    spent = {"eval": 0.0}
    evaluate = pipeline.evaluator.evaluate

    def timed_evaluate(*args: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter()
        try:
            return evaluate(*args, **kwargs)
        finally:
            spent["eval"] += time.perf_counter() - begin

    pipeline.evaluator.evaluate = timed_evaluate
    begin, cpu = time.perf_counter(), time.process_time()
    result = pipeline.run()
    seconds = time.perf_counter() - begin - spent["eval"]
    return dict(train_seconds=seconds, train_cpu_seconds=time.process_time() - cpu, envstep=int(result.envstep),
                train_iter=int(result.train_iter))


def worker_sb3(algo: str, env: str, steps: int, learning_starts: int, threads: Optional[int], seed: int,
               work_dir: str, settings: Mapping[str, Any]) -> Dict[str, Any]:
    """Train SB3's ``algo`` with ``settings`` (:func:`sb3_kwargs` of rlearn's bundled config, computed by the
    parent process so that this one imports only SB3)."""
    import numpy as np
    import torch
    from stable_baselines3 import PPO, SAC, TD3
    from stable_baselines3.common.noise import NormalActionNoise

    if threads is not None:
        torch.set_num_threads(threads)
    kwargs = json.loads(json.dumps(settings))  # a deep copy
    env_id = ENV_IDS[env]
    if algo == "td3":
        import gymnasium as gym

        n_actions = gym.make(env_id).action_space.shape[0]
        noise_std = kwargs.pop("noise_std")
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n_actions), noise_std * np.ones(n_actions))
    if algo == "ppo":
        kwargs["policy_kwargs"]["activation_fn"] = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[
            kwargs["policy_kwargs"].pop("activation")]
    model_cls = {"td3": TD3, "sac": SAC, "ppo": PPO}[algo]
    model = model_cls("MlpPolicy", env_id, seed=seed, device="cpu", verbose=0, **kwargs)
    begin, cpu = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps)
    return dict(train_seconds=time.perf_counter() - begin, train_cpu_seconds=time.process_time() - cpu,
                envstep=int(model.num_timesteps))


WORKERS = {"rlearn": worker_rlearn, "sb3": worker_sb3}


def report(runs: List[Dict[str, Any]], out_file: Path, steps: Any, learning_starts: Any) -> None:
    """Print the per-pair ratios and the summary of ``runs``; write them with the runs to ``out_file``."""
    rows = pair_ratios(runs)
    print("\nper pair (SB3 seconds / rlearn seconds, training):")
    for row in rows:
        print(f"  {row['algo']} {row['env']} threads={row['threads']} pair {row['pair']}: rlearn {row['rlearn_s']:.1f} s,"
              f" SB3 {row['sb3_s']:.1f} s -> {row['ratio']:.2f}x (whole process {row['process_ratio']:.2f}x"
              + (f", CPU time {row['cpu_ratio']:.2f}x)" if row.get("cpu_ratio") else ")"))
    summary = summarise(rows)
    print("\nsummary:")
    for entry in summary:
        print("  " + summary_line(entry))
    print(f"load after: {load()}")
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(json.dumps(dict(steps=steps, learning_starts=learning_starts, runs=runs, pairs=rows,
                                        summary=summary), indent=1))


def run_worker(library: str, **kwargs: Any) -> Dict[str, Any]:
    """One training run in a fresh Python process; adds its whole wall time (``process_seconds``)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", library, "--worker-args", json.dumps(kwargs)]
    begin = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, RLEARN_NO_PROGRESS="1"))
    elapsed = time.perf_counter() - begin
    if proc.returncode != 0:
        raise RuntimeError(f"{library} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_seconds"] = elapsed
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=ALGOS)
    parser.add_argument("--envs", nargs="+", default=list(ENV_IDS), choices=sorted(ENV_IDS))
    parser.add_argument("--threads", nargs="+", default=["default", "1"],
                        help="thread settings to run: 'default' (each library's own) and/or a number for both")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per run (default 20,000)")
    parser.add_argument("--learning-starts", type=int, default=10_000,
                        help="TD3/SAC: random env steps before learning (the zoo's 10,000)")
    parser.add_argument("--pairs", type=int, default=3, help="pairs per algorithm, task and thread setting")
    parser.add_argument("--first-pair", type=int, default=0,
                        help="number the pairs from this one (its parity decides who runs first; its seed is --seed + "
                             "pair): continues an earlier invocation, reported together with --merge")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--suffix", default="", help="appended to the result file name (e.g. _quick)")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="result files of earlier invocations: report their runs together (written to "
                             "mujoco_vs_sb3<suffix>.json) instead of training")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--worker-args", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(WORKERS[args.worker](**json.loads(args.worker_args))))
        return 0
    if args.merge:
        parts = [json.loads(path.read_text()) for path in args.merge]
        runs = [run for part in parts for run in part["runs"]]
        steps, starts = ([part[key] for part in parts] for key in ("steps", "learning_starts"))
        report(runs, args.out / f"mujoco_vs_sb3{args.suffix}.json", steps[0] if len(set(map(str, steps))) == 1 else steps,
               starts[0] if len(set(map(str, starts))) == 1 else starts)
        return 0
    if not 0 < args.learning_starts < args.steps:
        parser.error("--learning-starts must be between 0 and --steps")
    threads_list = [None if t == "default" else int(t) for t in args.threads]
    args.out.mkdir(parents=True, exist_ok=True)
    out_file = args.out / f"mujoco_vs_sb3{args.suffix}.json"
    from rlearn.config import load_config

    settings = {(algo, env): sb3_kwargs(load_config(f"{algo}_{env}")["policy"], args.learning_starts)
                for algo in args.algos for env in args.envs}
    runs: List[Dict[str, Any]] = []
    print(f"load before: {load()}; {args.steps} env steps per run, learning after {args.learning_starts} (TD3/SAC)",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_mujoco_") as tmp:
        for pair in range(args.first_pair, args.first_pair + args.pairs):
            for algo in args.algos:
                for env in args.envs:
                    for threads in threads_list:
                        for library in run_order(pair):
                            before = load()
                            extra = dict(settings=settings[algo, env]) if library == "sb3" else {}
                            run = run_worker(library, algo=algo, env=env, steps=args.steps,
                                             learning_starts=args.learning_starts, threads=threads,
                                             seed=args.seed + pair, work_dir=str(Path(tmp) / f"{library}_{len(runs)}"),
                                             **extra)
                            run.update(library=library, algo=algo, env=env, pair=pair, load_before=before,
                                       load_after=load(), threads="default" if threads is None else str(threads))
                            runs.append(run)
                            print(f"pair {pair} {algo} {env} threads={run['threads']:7s} {library:6s} "
                                  f"{run['train_seconds']:7.1f} s training ({run['envstep'] / run['train_seconds']:.0f}"
                                  f" env steps/s, {run['train_cpu_seconds']:.1f} s CPU), {run['process_seconds']:.1f} s "
                                  f"process; load {before} -> "
                                  f"{run['load_after']}", flush=True)
                            out_file.write_text(json.dumps(dict(steps=args.steps, learning_starts=args.learning_starts,
                                                                runs=runs), indent=1))
    report(runs, out_file, args.steps, args.learning_starts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
