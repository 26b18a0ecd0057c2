"""TD3 on Pendulum-v1: learning, speed side by side with Stable-Baselines3, and monitoring overhead.

Sections (``--only`` picks some; default: all):

* ``peak``: single-core matmul throughput (GFLOP/s) for the shapes of a [400, 300] network on a batch of 256
  -- the ceiling that a TD3 iteration's achieved GFLOP/s is compared with.
* ``step``: milliseconds per gradient step, in this process, alternating: rlearn's ``TD3Policy._forward_learn``
  (``learn_threads`` 1, 2 fixed, 2 adaptive) and SB3's ``TD3.train(gradient_steps=1)`` (torch threads 1 and 2), with achieved
  GFLOP/s (algorithmic FLOPs of one TD3 iteration, the same count for both).
* ``speed``: whole training runs in fresh processes, alternating rlearn (``rlearn train td3_pendulum``'s run:
  log table, TensorBoard, checkpoints) and SB3 TD3 with identical settings -- [400, 300], batch 256, lr 1e-3,
  gamma 0.98, learning_starts 10,000, buffer 200,000, one gradient step per env step, 20,000 steps -- each
  followed by a 10-episode evaluation; env steps per second, their ratio, and the final returns -- each
  library's own 10-episode evaluation, and both final policies played from the same 50 starting states
  (``shared_start_return``, outside the timed region), compared per seed. With ``--baseline-ref REF`` the
  run of revision REF (a temporary git worktree, its own code) alternates with them as a third variant.
  Each run also reports the seconds spent inside the gradient steps (rlearn: ``TD3Policy._forward_learn``,
  wrapped on the class, a baseline revision's too; SB3: ``TD3.train``, which samples its own batches) and
  so the seconds in everything else (collection, buffer, learner, hooks, evaluation, start-up).
* ``overhead``: the learner with ``LogShowHook`` at its default frequency (trace off) vs the learner with no hooks,
  same loop (collector -> replay buffer -> learner.train), in alternating blocks of 100 iterations; the
  slow-down as the median of paired block ratios, and directly as the time spent inside the hook.
* ``learning``: 3 seeds x 20,000 env steps through the run, evaluated (10 episodes) every 1,000 steps;
  ``benchmarks/results/td3_pendulum_learning.csv`` and ``.png`` (drawn by ``rlearn plot`` through
  ``benchmarks/curves.py``; ``--sb3-curves`` adds SB3 TD3's curves with the same settings); target >= -200 at
  20k on every seed.

    .venv/bin/python benchmarks/bench_td3.py                 # everything (~30 min on an idle 2-core machine)
    .venv/bin/python benchmarks/bench_td3.py --quick         # shortened runs (~3 min)
    .venv/bin/python benchmarks/bench_td3.py --only speed --repeats 3
    .venv/bin/python benchmarks/bench_td3.py --only learning --seeds 0 1 2

SB3 comes with the ``bench`` extra (``pip install -e '.[bench]'``). Timings on a shared machine are noisy:
runs alternate so that both sides see the same load, and the ratio is what to read.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # benchmarks/curves.py
RESULTS = HERE / "results"

#: the settings both libraries run with (rl-zoo's TD3 Pendulum-v1 hyperparameters)
SETTINGS = dict(
    hidden_sizes=[400, 300], batch_size=256, lr=1e-3, gamma=0.98, learning_starts=10_000, buffer_size=200_000,
    tau=0.005, exploration_noise=0.1, target_noise=0.2, target_noise_clip=0.5, actor_update_freq=2,
    total_steps=20_000,
)


# ------------------------------------------------------------------------------------------- FLOPs
def _dense_flops(sizes: Sequence[int], batch: int, skip_first: bool = False) -> int:
    """2*B*in*out summed over the layers of an MLP with layer widths ``sizes`` (optionally not the first)."""
    pairs = list(zip(sizes[:-1], sizes[1:]))[1 if skip_first else 0:]
    return sum(2 * batch * a * b for a, b in pairs)


def td3_iteration_flops(obs_dim: int, act_dim: int, hidden: Sequence[int], batch: int, actor_update_freq: int) -> float:
    """Matmul FLOPs of one TD3 iteration (the minimum the algorithm needs; elementwise work not counted).

    target: actor' forward + both critics' forward; critic update: both critics forward, weight gradients
    and input gradients of every layer but the first; actor step (every ``actor_update_freq``): actor and Q1
    forward, Q1 input gradients (no weight gradients), actor weight and input gradients.
    """
    actor = [obs_dim, *hidden, act_dim]
    critic = [obs_dim + act_dim, *hidden, 1]
    f_a, f_c = _dense_flops(actor, batch), _dense_flops(critic, batch)
    target = f_a + 2 * f_c
    critic_update = 2 * (f_c + f_c + _dense_flops(critic, batch, skip_first=True))
    actor_update = f_a + f_c + f_c + f_a + _dense_flops(actor, batch, skip_first=True)
    return target + critic_update + actor_update / actor_update_freq


# -------------------------------------------------------------------------------------- utilities
def _table(rows: List[List[Any]], headers: List[str]) -> str:
    from tabulate import tabulate

    return tabulate(rows, headers=headers, floatfmt=".3g")


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


# ------------------------------------------------------------------------------------ matmul peak
def matmul_peak(repeats: int = 200, threads: int = 1) -> Dict[str, float]:
    """GFLOP/s on ``threads`` torch threads of the [256, 400] x [400, 300] products of a forward and a backward
    pass (best of 5 rounds: the machine's ceiling for a TD3 iteration's products, which are of these shapes)."""
    import torch

    outer = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, w, g = torch.randn(256, 400), torch.randn(400, 300), torch.randn(256, 300)
        shapes = {"X @ W (forward)": lambda: a @ w, "X^T @ dY (weight grad)": lambda: a.t() @ g,
                  "dY @ W^T (input grad)": lambda: g @ w.t()}
        out = {}
        for name, fn in shapes.items():
            for _ in range(20):
                fn()
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(repeats // 5):
                    fn()
                best = min(best, (time.perf_counter() - start) / (repeats // 5))
            out[name] = 2 * 256 * 400 * 300 / best / 1e9
        return out
    finally:
        torch.set_num_threads(outer)


# ------------------------------------------------------------------------------------ step timing
def _pendulum_spaces():
    import gymnasium as gym

    env = gym.make("Pendulum-v1")
    return env.observation_space, env.action_space


def _random_batch(rng: np.random.Generator, n: int = 256):
    import torch

    t = lambda *shape: torch.as_tensor(rng.uniform(-1, 1, size=shape), dtype=torch.float32)  # noqa: E731
    return dict(obs=t(n, 3), action=t(n, 1), reward=t(n) * 8 - 8, next_obs=t(n, 3), terminated=torch.zeros(n))


def td3_policy_at(ref: str) -> type:
    """``TD3Policy`` as it was at git revision ``ref`` (e.g. ``HEAD~1``), loaded beside today's, so that one
    process can time both. ``policies/td3.py`` of that revision is executed as a module of its own; the
    ``policies`` modules it imports (``adam_step``, ``config_checks``, ``actor_critic``, ``base``) are loaded from the
    same revision."""
    import types

    def source(path: str) -> Optional[str]:
        try:
            return subprocess.check_output(["git", "show", f"{ref}:{path}"], cwd=HERE.parent, text=True,
                                           stderr=subprocess.DEVNULL)
        except subprocess.CalledProcessError:
            return None

    def load(name: str, text: str) -> types.ModuleType:
        module = types.ModuleType(name)
        module.__file__ = f"<{ref}:{name}>"
        sys.modules[name] = module
        exec(compile(text, module.__file__, "exec"), module.__dict__)
        return module

    td3 = source("policies/td3.py")
    if td3 is None:
        raise SystemExit(f"--baseline-ref: no policies/td3.py at git revision {ref!r}")
    for module in ("adam_step", "config_checks", "actor_critic", "base"):  # policy modules it may import
        text = source(f"policies/{module}.py")
        if text is not None and f"from policies.{module} import" in td3:
            load(f"_bench_ref_{module}", text)
            td3 = td3.replace(f"from policies.{module} import", f"from _bench_ref_{module} import")
    return load("_bench_ref_td3", td3).TD3Policy


def make_rlearn_stepper(learn_threads: int, adaptive: bool = True, policy_class: Optional[type] = None
                        ) -> Callable[[int], None]:
    """``run(n)``: n TD3 iterations of rlearn's policy on replay-like batches (sampling excluded).

    ``learn_threads``: torch threads of each iteration; ``adaptive``: let the policy's
    :class:`~rlearn.nn.ThreadChooser` measure and fall back to one thread when more do not pay (as in a
    real run), or always use ``learn_threads``. ``policy_class``: another ``TD3Policy`` (see
    :func:`td3_policy_at`); default today's.
    """
    from policies.td3 import TD3Policy

    TD3Policy = policy_class or TD3Policy  # noqa: N806

    obs_space, act_space = _pendulum_spaces()
    s = SETTINGS
    policy = TD3Policy(dict(hidden_sizes=s["hidden_sizes"], batch_size=s["batch_size"], lr_actor=s["lr"],
                            lr_critic=s["lr"], gamma=s["gamma"], learn_threads=learn_threads,
                            adaptive_threads=adaptive), obs_space, act_space, seed=0)
    rng = np.random.default_rng(0)
    batches = [_random_batch(rng) for _ in range(16)]

    def run(n: int) -> None:
        for i in range(n):
            info = policy._forward_learn(batches[i % len(batches)])
            [float(value) for value in info.values()]  # read on the host, as the monitor does

    return run


def make_sb3_stepper() -> Callable[[int], None]:
    """``run(n)``: n calls of SB3's ``TD3.train(gradient_steps=1)`` (its replay sampling included)."""
    from stable_baselines3 import TD3

    model = _sb3_model(seed=0, learning_starts=0)
    env = model.get_env()
    obs = env.reset()
    for _ in range(2000):  # fill the replay buffer with random transitions, as SB3's collection would
        action = np.array([env.action_space.sample()])
        next_obs, reward, done, infos = env.step(action)
        model.replay_buffer.add(obs, next_obs, model.policy.scale_action(action), reward, done, infos)
        obs = next_obs
    model._setup_learn(total_timesteps=1)
    assert isinstance(model, TD3)

    def run(n: int) -> None:
        for _ in range(n):
            model.train(gradient_steps=1, batch_size=SETTINGS["batch_size"])

    return run


def step_timing(iters: int, repeats: int, baseline_ref: Optional[str] = None) -> List[Dict[str, Any]]:
    """ms per gradient step, alternating the variants ``repeats`` times; returns one row per variant.

    ``baseline_ref``: also time ``TD3Policy`` as it was at that git revision (1 thread and 2 adaptive),
    alternating with today's in the same process; each row then carries its paired per-repeat ratios.
    """
    import torch

    variants: Dict[str, tuple] = {}
    have_sb3 = _have_sb3()
    if have_sb3:
        variants["SB3 TD3, torch threads=1"] = (make_sb3_stepper(), 1)
        variants["SB3 TD3, torch threads=2"] = (make_sb3_stepper(), 2)
    variants["rlearn TD3, learn_threads=1"] = (make_rlearn_stepper(1), 1)
    variants["rlearn TD3, learn_threads=2, fixed"] = (make_rlearn_stepper(2, adaptive=False), 1)
    variants["rlearn TD3, learn_threads=2, adaptive (default)"] = (make_rlearn_stepper(2), 1)
    if baseline_ref:
        old = td3_policy_at(baseline_ref)
        variants[f"rlearn TD3 @ {baseline_ref}, learn_threads=1"] = (make_rlearn_stepper(1, policy_class=old), 1)
        variants[f"rlearn TD3 @ {baseline_ref}, learn_threads=2, fixed"] = (
            make_rlearn_stepper(2, adaptive=False, policy_class=old), 1)
    wall: Dict[str, List[float]] = {k: [] for k in variants}
    cpu: Dict[str, List[float]] = {k: [] for k in variants}
    threads = torch.get_num_threads()
    try:
        for name, (run, nthreads) in variants.items():  # warm-up
            torch.set_num_threads(nthreads)
            run(10)
        for _ in range(repeats):
            for name, (run, nthreads) in variants.items():
                torch.set_num_threads(nthreads)
                start, start_cpu = time.perf_counter(), time.process_time()
                run(iters)
                wall[name].append((time.perf_counter() - start) / iters * 1e3)
                cpu[name].append((time.process_time() - start_cpu) / iters * 1e3)
    finally:
        torch.set_num_threads(threads)
    s = SETTINGS
    flops = td3_iteration_flops(3, 1, s["hidden_sizes"], s["batch_size"], s["actor_update_freq"])
    rows = []
    for name in variants:
        ms = _median(wall[name])
        rows.append(dict(variant=name, ms_per_step=ms, cpu_ms_per_step=_median(cpu[name]),
                         gflops=flops / (ms * 1e-3) / 1e9, samples_ms=wall[name]))
    return rows


def paired_ratios(rows: List[Dict[str, Any]], numerator: str, denominator: str) -> List[float]:
    """Per-repeat ratios ``numerator ms / denominator ms`` of two variants timed in the same alternation."""
    by_name = {r["variant"]: r["samples_ms"] for r in rows}
    return [a / b for a, b in zip(by_name[numerator], by_name[denominator])]


# ------------------------------------------------------------------------------- full-run workers
def _have_sb3() -> bool:
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return False
    return True


#: episodes of the shared-start evaluation that follows every speed run (outside the timed region)
SHARED_EVAL_EPISODES = 50
#: episode ``i`` of run ``seed`` starts from ``reset(seed=SHARED_EVAL_SEED + 1000 * seed + i)``, for both libraries
SHARED_EVAL_SEED = 777_000


def shared_start_return(policy: Any, seed: int, episodes: int = SHARED_EVAL_EPISODES) -> float:
    """Mean return of ``policy._forward_eval`` (deterministic, environment units) on Pendulum-v1 over
    ``episodes`` episodes whose starting states depend only on ``seed``.

    Each library's own evaluation (10 episodes from its own starting states) is what its users see, but a
    Pendulum return depends as much on where the pendulum starts as on the policy (a near-optimal policy
    scores about -0 from the top and about -350 from the bottom), so two libraries' 10-episode means differ by
    tens for that reason alone. Playing both final policies from the *same* starts leaves only the policies'
    difference, paired per seed. Episode ``i`` is one :class:`rlearn.env.Evaluator` evaluation seeded with
    ``SHARED_EVAL_SEED + 1000 * seed + i``.
    """
    from rlearn.collect import Evaluator
    from rlearn.env import make_vector_env

    env = make_vector_env("Pendulum-v1", 1)
    try:
        returns = [Evaluator(env, policy, 1, seed=SHARED_EVAL_SEED + 1000 * seed + episode).evaluate()
                   ["episode_return_mean"] for episode in range(episodes)]
    finally:
        env.close()
    return float(np.mean(returns))


class _SB3Actor:
    """An SB3 model seen as an rlearn evaluation policy: ``_forward_eval(obs [N, 3]) -> actions [N, 1]``."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def _forward_eval(self, obs: np.ndarray) -> np.ndarray:
        return self.model.predict(obs, deterministic=True)[0]


def _sb3_model(seed: int, learning_starts: int):
    import gymnasium as gym
    from stable_baselines3 import TD3
    from stable_baselines3.common.noise import NormalActionNoise

    s = SETTINGS
    env = gym.make("Pendulum-v1")
    return TD3(
        "MlpPolicy", env, learning_rate=s["lr"], buffer_size=s["buffer_size"], learning_starts=learning_starts,
        batch_size=s["batch_size"], tau=s["tau"], gamma=s["gamma"], train_freq=1, gradient_steps=1,
        action_noise=NormalActionNoise(np.zeros(1), s["exploration_noise"] * np.ones(1)),
        policy_delay=s["actor_update_freq"], target_policy_noise=s["target_noise"],
        target_noise_clip=s["target_noise_clip"], policy_kwargs=dict(net_arch=list(s["hidden_sizes"])),
        seed=seed, device="cpu", verbose=0,
    )


def worker_sb3(seed: int, steps: int, learning_starts: int, threads: Optional[int]) -> Dict[str, Any]:
    """Train SB3 TD3 and evaluate it on 10 episodes; the timed region is construction + learn + evaluation."""
    import gymnasium as gym
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy

    if threads is not None:
        torch.set_num_threads(threads)
    from run_timing import time_method

    start = time.perf_counter()
    model = _sb3_model(seed, learning_starts)
    timers: Dict[str, float] = {}
    time_method(model, "train", timers, "learn")  # SB3's gradient steps (each samples its own batch)
    model.learn(total_timesteps=steps)
    train_seconds = time.perf_counter() - start
    eval_env = gym.make("Pendulum-v1")
    eval_env.reset(seed=10_000 + seed)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    seconds = time.perf_counter() - start
    shared = shared_start_return(_SB3Actor(model), seed)
    return dict(seconds=seconds, train_seconds=train_seconds, learn_seconds=timers["learn"], steps=steps,
                return_mean=float(mean), return_std=float(std), shared_return=shared,
                torch_threads=torch.get_num_threads())


def rlearn_overrides(steps: int, learning_starts: int, seed: int, eval_freq: Optional[int]) -> List[str]:
    return [f"seed={seed}", f"train.max_env_steps={steps}", f"policy.learning_starts={learning_starts}",
            f"eval.freq={eval_freq if eval_freq else 'none'}", "eval.episodes=10"]


def parse_threads(spec: str) -> Dict[str, int]:
    """``"LxT"`` -> ``policy.learn_threads = L`` and torch ``num_threads = T`` (``"L"`` alone: the config's T)."""
    learn, _, torch_threads = spec.partition("x")
    out = dict(learn_threads=int(learn))
    if torch_threads:
        out["num_threads"] = int(torch_threads)
    return out


def worker_rlearn(seed: int, steps: int, learning_starts: int, learn_threads: int, num_threads: Optional[int] = None,
                  eval_freq: Optional[int] = None, work_dir: Optional[str] = None) -> Dict[str, Any]:
    """Train through ``rlearn.run.train`` (td3_pendulum: log, TensorBoard, checkpoints) and evaluate at the end."""
    from rlearn.config import load_config
    from rlearn.run import Trainer

    overrides = rlearn_overrides(steps, learning_starts, seed, eval_freq) + [f"policy.learn_threads={learn_threads}"]
    if num_threads is not None:
        overrides.append(f"num_threads={num_threads}")
    cfg = load_config("td3_pendulum", overrides=overrides)
    tmp = None
    if work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_td3_")
        work_dir = tmp.name
    try:
        start = time.perf_counter()
        trainer = Trainer(cfg, work_dir=Path(work_dir) / "run", progress=False)
        result = trainer.run()
        seconds = time.perf_counter() - start
    finally:
        if tmp is not None:
            tmp.cleanup()
    shared = shared_start_return(trainer.policy, seed)
    last = result.last_eval or {}
    chooser = getattr(trainer.policy, "thread_chooser", None)
    return dict(seconds=seconds, steps=result.envstep, train_iter=result.train_iter,
                return_mean=last.get("episode_return_mean"), return_std=last.get("episode_return_std"),
                shared_return=shared,
                # iterations that ran on one thread (probes, or the chooser's fall-back under load)
                one_thread_iterations=chooser.iterations_at.get(1, 0) if chooser is not None else None)


def timed_rlearn_worker(tree: Optional[Path], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """:func:`worker_rlearn` -- this file's, or with ``tree`` that checkout's own (with its ``rlearn`` and
    ``policies``, first on the path) -- plus ``learn_seconds``: the time inside ``TD3Policy._forward_learn``.
    The method is wrapped on the class, so that every revision's policy is timed the same way."""
    from policies.td3 import TD3Policy
    from run_timing import time_method

    worker = worker_rlearn
    if tree is not None:
        spec = importlib.util.spec_from_file_location("bench_td3_baseline", tree / "benchmarks" / "bench_td3.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        worker = module.worker_rlearn
    timers: Dict[str, float] = {}
    time_method(TD3Policy, "_forward_learn", timers, "learn")
    return dict(worker(**kwargs), learn_seconds=timers["learn"])


def run_worker(kind: str, tree: Optional[Path] = None, **kwargs: Any) -> Dict[str, Any]:
    """Run one training in a fresh Python process (so that runs do not share caches or threads); ``tree``: a
    checkout of another revision whose own ``rlearn``, ``policies`` and worker run instead of this one's."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--worker-args", json.dumps(kwargs)]
    env = dict(os.environ, RLEARN_NO_PROGRESS="1")
    if tree is not None:
        cmd += ["--worker-tree", str(tree)]
        env["PYTHONPATH"] = str(tree)  # ahead of the installed (editable) rlearn
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _rlearn_name(spec: str, label: str = "rlearn") -> str:
    threads = parse_threads(spec)
    torch_threads = threads.get("num_threads", "config's")
    return f"{label} (learn_threads={threads['learn_threads']}, torch threads={torch_threads})"


@contextlib.contextmanager
def checkout_of(ref: str) -> Iterator[Path]:
    """A temporary ``git worktree`` of revision ``ref`` of this repository (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="bench_td3_ref_") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), ref], cwd=HERE.parent, check=True,
                       capture_output=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=HERE.parent, capture_output=True)


def speed(steps: int, learning_starts: int, repeats: int, sb3_threads: Sequence[Optional[int]],
          rlearn_threads: Sequence[str], baseline_tree: Optional[Path] = None, baseline_ref: str = "") -> Dict[str, Any]:
    """Alternating full runs; rows of env steps/s per variant (rlearn variants first). ``baseline_tree``: a
    checkout of revision ``baseline_ref`` whose own run is one more variant (the first rlearn threads)."""
    variants: Dict[str, tuple] = {_rlearn_name(t): ("rlearn", parse_threads(t), None) for t in rlearn_threads}
    if baseline_tree is not None:
        variants[_rlearn_name(rlearn_threads[0], label=f"rlearn @ {baseline_ref}")] = (
            "rlearn", parse_threads(rlearn_threads[0]), baseline_tree)
    if _have_sb3():
        for t in sb3_threads:
            variants[f"SB3 (torch threads={t or 'default'})"] = ("sb3", dict(threads=t), None)
    runs: Dict[str, List[Dict[str, Any]]] = {k: [] for k in variants}
    for rep in range(repeats):
        for name, (kind, extra, tree) in variants.items():
            out = run_worker(kind, tree=tree, seed=rep, steps=steps, learning_starts=learning_starts, **extra)
            runs[name].append(out)
            one_thread, learn = out.get("one_thread_iterations"), out["learn_seconds"]
            print(f"  [{name}] seed {rep}: {out['seconds']:.1f} s, {steps / out['seconds']:.1f} env steps/s, "
                  f"{learn:.1f} s in gradient steps, {out['seconds'] - learn:.1f} s in the rest, "
                  f"return {out['return_mean']:.1f}, shared-start return {out['shared_return']:.1f}"
                  + (f", {one_thread} of {out['train_iter']} iterations on one thread" if one_thread is not None else "")
                  + f"  (load {_load()})", flush=True)
    first = next(iter(runs))
    rows = []
    for name, outs in runs.items():
        secs = _median([o["seconds"] for o in outs])
        # same seed, consecutive runs: the ratio of a pair is free of the machine's slow drifts
        pair_ratios = [o["seconds"] / r["seconds"] for o, r in zip(outs, runs[first])]
        shared_diff = [r["shared_return"] - o["shared_return"] for o, r in zip(outs, runs[first])]
        rows.append(dict(variant=name, seconds=secs, env_steps_per_s=steps / secs,
                         # inside the gradient steps (rlearn: _forward_learn; SB3: train(), with its sampling)
                         learn_seconds=_median([o["learn_seconds"] for o in outs]),
                         median_pair_ratio=_median(pair_ratios), pair_ratios=[round(x, 3) for x in pair_ratios],
                         returns=[round(o["return_mean"], 1) for o in outs],
                         shared_returns=[round(o["shared_return"], 1) for o in outs],
                         shared_return_mean=float(np.mean([o["shared_return"] for o in outs])),
                         shared_diff_mean=float(np.mean(shared_diff)),
                         shared_diff_se=float(np.std(shared_diff, ddof=1) / np.sqrt(len(shared_diff)))
                         if len(shared_diff) > 1 else float("nan")))
    return dict(rows=rows, runs=runs, shared_eval=dict(episodes=SHARED_EVAL_EPISODES, seed_base=SHARED_EVAL_SEED))


# ---------------------------------------------------------------------------------- monitoring cost
def _time_calls(obj: Any, names: Sequence[str], totals: Dict[str, float]) -> None:
    """Wrap ``obj``'s methods ``names`` (on the instance) so that their wall time adds up in ``totals['hook']``."""
    for name in names:
        method = getattr(obj, name)

        def timed(*args: Any, _method: Callable = method, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                totals["hook"] += time.perf_counter() - start

        setattr(obj, name, timed)


def overhead(pairs: int, block: int = 100) -> Dict[str, Any]:
    """Same loop (collect 1 step -> buffer -> learner.train), learner with LogShowHook (default freq) vs none.

    Two loops live in this process, each with its own policy, and run in alternating blocks of ``block``
    iterations (the default log frequency, so every LogShowHook block holds exactly one log), ``pairs``
    times, in the order ABBA BAAB ... so that a slow drift of the machine cancels. Two estimates:

    * **paired**: the median over pairs of ``hooked block / no-hooks block - 1`` (wall time), and its
      interquartile range -- what a user's training loses, indirect costs included, with the machine's noise;
    * **direct**: the wall time spent inside LogShowHook's own calls, per iteration, as a share of the
      no-hooks iteration -- the hook's cost itself, free of the noise of two separate measurements.

    The policy runs as in ``td3_pendulum``: two threads per iteration (fixed, so that no thread probe lands
    in one loop only).
    """
    import torch

    from policies.td3 import TD3Policy
    from rlearn.buffer import ReplayBuffer
    from rlearn.collect import Collector
    from rlearn.env import make_vector_env
    from rlearn.hooks import LogShowHook
    from rlearn.learner import BaseLearner
    from rlearn.logging import get_logger

    torch.set_num_threads(1)
    logger = get_logger(name="bench_td3_overhead")
    logger.propagate = False
    logger.handlers[:] = []  # the table is built but goes nowhere: we time the hook's work, not a terminal
    s = SETTINGS
    loops = {}
    hook_time = {"hook": 0.0}
    tmp = tempfile.TemporaryDirectory(prefix="bench_td3_overhead_")
    for name in ("no hooks", "LogShowHook"):
        env = make_vector_env("Pendulum-v1", 1, seed=0)
        policy = TD3Policy(dict(hidden_sizes=s["hidden_sizes"], lr_actor=s["lr"], lr_critic=s["lr"], gamma=s["gamma"],
                                learning_starts=0, learn_threads=2, adaptive_threads=False),
                           env.single_observation_space,
                           env.single_action_space, seed=0)
        collector = Collector(env, policy, seed=0)
        buffer = ReplayBuffer(s["buffer_size"], (3,), (1,), seed=0)
        buffer.add(collector.collect(1000).transitions)
        learner = BaseLearner(policy, {}, work_dir=Path(tmp.name) / name.replace(" ", "_"), logger=logger)
        if name == "LogShowHook":
            hook = LogShowHook()
            learner.register_hook(hook, "BELOW_NORMAL")  # default freq: learner.log_freq = 100
            _time_calls(hook, ["before_run", "after_iter", "after_run"], hook_time)
        learner.call_hook("before_run")

        def loop(n: int, learner=learner, collector=collector, buffer=buffer) -> None:
            for _ in range(n):
                buffer.add(collector.collect(1).transitions)
                learner.train(buffer.sample(s["batch_size"]), envstep=collector.envstep)

        loops[name] = (loop, learner)
    for loop, _ in loops.values():
        loop(block)  # warm-up; keeps both loops aligned on multiples of the log frequency
    hook_time["hook"] = 0.0
    names = list(loops)
    wall: Dict[str, List[float]] = {k: [] for k in names}
    for i in range(pairs):
        order = names if i % 4 in (0, 3) else names[::-1]  # ABBA BAAB: drift cancels
        for name in order:
            start = time.perf_counter()
            loops[name][0](block)
            wall[name].append((time.perf_counter() - start) / block * 1e3)
    for _, learner in loops.values():
        learner.close()
    tmp.cleanup()
    ratios = sorted((h / b - 1) * 100 for b, h in zip(wall["no hooks"], wall["LogShowHook"]))
    q = statistics.quantiles(ratios, n=4)
    base = _median(wall["no hooks"])
    hook_ms = hook_time["hook"] / (pairs * block) * 1e3
    return dict(
        pairs=pairs, block=block,
        no_hooks_ms=base, log_show_ms=_median(wall["LogShowHook"]),
        paired_slowdown_pct=statistics.median(ratios), paired_iqr_pct=[q[0], q[2]],
        hook_ms_per_iter=hook_ms, direct_slowdown_pct=hook_ms / base * 100,
    )


# ---------------------------------------------------------------------------------------- learning
def sb3_learning_curve(seed: int, steps: int, learning_starts: int, eval_freq: int) -> List[tuple]:
    """SB3 TD3 with the same settings, evaluated (10 deterministic episodes) every ``eval_freq`` env steps by
    SB3's own ``EvalCallback``; ``[(env_steps, mean, std), ...]``."""
    import gymnasium as gym
    from stable_baselines3.common.callbacks import EvalCallback

    model = _sb3_model(seed, learning_starts)
    eval_env = gym.make("Pendulum-v1")
    eval_env.reset(seed=10_000 + seed)
    callback = EvalCallback(eval_env, eval_freq=eval_freq, n_eval_episodes=10, deterministic=True, verbose=0)
    model.learn(total_timesteps=steps, callback=callback)
    return [(int(step), float(np.mean(r)), float(np.std(r)))
            for step, r in zip(callback.evaluations_timesteps, callback.evaluations_results)]


def learning(seeds: Sequence[int], steps: int, learning_starts: int, eval_freq: int, threads: str,
             out_dir: Path, sb3: bool = False) -> Dict[str, Any]:
    """Pipeline runs per seed (and, with ``sb3``, SB3 TD3 runs with the same settings); eval curves into a CSV,
    and a PNG drawn by ``rlearn plot`` from the runs' work dirs (``benchmarks/curves.py``; SB3's curves are
    written as reference runs), kept under ``out_dir/td3_learning_runs``."""
    import shutil

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from curves import plot_learning_curves, write_reference_run

    out_dir.mkdir(parents=True, exist_ok=True)
    runs_dir = out_dir / "td3_learning_runs"
    shutil.rmtree(runs_dir, ignore_errors=True)
    curves: Dict[tuple, List[tuple]] = {}
    finals: Dict[int, Optional[float]] = {}
    work_dirs: List[Path] = []
    for seed in seeds:
        work_dir = runs_dir / f"rlearn_seed{seed}"
        out = run_worker("rlearn", seed=seed, steps=steps, learning_starts=learning_starts,
                         **parse_threads(threads), eval_freq=eval_freq, work_dir=str(work_dir))
        acc = EventAccumulator(str(work_dir / "run" / "tb"), size_guidance={"scalars": 0})
        acc.Reload()
        means = {e.step: e.value for e in acc.Scalars("evaluator_step/episode_return_mean")}
        stds = {e.step: e.value for e in acc.Scalars("evaluator_step/episode_return_std")}
        curves[("rlearn", seed)] = [(step, means[step], stds.get(step, float("nan"))) for step in sorted(means)]
        finals[seed] = out["return_mean"]
        work_dirs.append(work_dir / "run")
        print(f"  rlearn seed {seed}: return {out['return_mean']:.1f} +- {out['return_std']:.1f} at {out['steps']} "
              f"steps ({out['seconds']:.0f} s)", flush=True)
        if sb3 and _have_sb3():
            points = sb3_learning_curve(seed, steps, learning_starts, eval_freq)
            curves[("sb3", seed)] = points
            work_dirs.append(write_reference_run(runs_dir / f"sb3_seed{seed}", "sb3_td3", seed,
                                                 [(step, mean) for step, mean, _ in points]))
            print(f"  SB3 seed {seed}: return {points[-1][1]:.1f} at {points[-1][0]} steps", flush=True)
    csv_path = out_dir / "td3_pendulum_learning.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["library", "seed", "env_steps", "eval_return_mean", "eval_return_std"])
        for (library, seed), rows in curves.items():
            for step, mean, std in rows:
                writer.writerow([library, seed, step, f"{mean:.3f}", f"{std:.3f}"])
    png_path = plot_learning_curves(work_dirs, out_dir / "td3_pendulum_learning.png", "Pendulum-v1: TD3")
    sb3_finals = {seed: rows[-1][1] for (library, seed), rows in curves.items() if library == "sb3" and rows}
    return dict(finals=finals, sb3_finals=sb3_finals, csv=str(csv_path), png=str(png_path) if png_path else None)


# -------------------------------------------------------------------------------------------- main
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shortened runs (numbers are indicative only)")
    parser.add_argument("--only", nargs="+", choices=["peak", "step", "speed", "overhead", "learning"],
                        help="sections to run (default: all)")
    parser.add_argument("--repeats", type=int, default=None, help="alternations of the speed runs (default 3, quick 1)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="learning seeds (default 0 1 2, quick 0)")
    parser.add_argument("--rlearn-threads", nargs="+", default=["2"], metavar="LxT",
                        help="rlearn variants of the speed runs: policy.learn_threads L x torch num_threads T "
                             "('2' alone: the config's num_threads); the first one also for learning")
    parser.add_argument("--sb3-threads", type=lambda s: None if s == "default" else int(s), nargs="+",
                        default=[None], help="torch threads of the SB3 runs ('default' = torch's own choice, "
                                             "what SB3 users get; the default)")
    parser.add_argument("--baseline-ref", default=None, metavar="GIT_REF",
                        help="also measure TD3 as it was at this git revision (e.g. HEAD~1): step section, its "
                             "TD3Policy alternating with today's in the same process, with paired ratios; speed "
                             "section, its whole run (from a temporary git worktree) as one more variant")
    parser.add_argument("--sb3-curves", action="store_true",
                        help="learning section: also SB3 TD3 learning curves with the same settings (same seeds)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the CSV/PNG/JSON results go")
    parser.add_argument("--worker", choices=["rlearn", "sb3"], help=argparse.SUPPRESS)
    parser.add_argument("--worker-args", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--worker-tree", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        kwargs = json.loads(args.worker_args)
        out = timed_rlearn_worker(args.worker_tree, kwargs) if args.worker == "rlearn" else worker_sb3(**kwargs)
        print(json.dumps(out))
        return 0

    sections = args.only or ["peak", "step", "speed", "overhead", "learning"]
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    s = SETTINGS
    report: Dict[str, Any] = dict(settings=s, quick=quick, load_at_start=_load())
    print(f"TD3 Pendulum-v1 benchmark ({'quick' if quick else 'full'}); load average {_load()}; "
          f"{os.cpu_count()} CPUs", flush=True)

    two_core_peak = None
    if "peak" in sections:
        peak = matmul_peak()
        peak2 = matmul_peak(threads=2)
        report["matmul_peak_gflops"] = peak
        report["matmul_peak_gflops_2_threads"] = peak2
        # the ceiling on two shared cores: the better of one and two threads (under load two can be slower)
        two_core_peak = max(*peak.values(), *peak2.values())
        print("\n== matmul, [256 x 400] x [400 x 300], 1 and 2 torch threads ==")
        print(_table([[k, peak[k], peak2[k]] for k in peak], ["product", "GFLOP/s, 1 thread", "GFLOP/s, 2 threads"]))

    if "step" in sections:
        iters = 50 if quick else 150
        rows = step_timing(iters, repeats=args.repeats or (3 if quick else 5), baseline_ref=args.baseline_ref)
        report["step"] = rows
        flops = td3_iteration_flops(3, 1, s["hidden_sizes"], s["batch_size"], s["actor_update_freq"])
        print(f"\n== one gradient step (batch 256, [400, 300]; {flops / 1e6:.0f} MFLOP of matmuls), median of "
              f"alternating repeats ==")
        ref = next((r["ms_per_step"] for r in rows if r["variant"].startswith("SB3") and "threads=1" in r["variant"]), None)
        print(_table([[r["variant"], r["ms_per_step"], r["cpu_ms_per_step"], r["gflops"],
                       (ref / r["ms_per_step"]) if ref else "-"] for r in rows],
                     ["variant", "ms/step (wall)", "CPU ms/step", "GFLOP/s", "speed-up vs SB3 1 thread"]))
        if two_core_peak:
            best = max(r["gflops"] for r in rows if r["variant"].startswith("rlearn TD3,"))
            report["step_fraction_of_two_core_peak"] = best / two_core_peak
            print(f"fastest rlearn variant: {best:.1f} GFLOP/s = {100 * best / two_core_peak:.0f} % of the best matmul "
                  f"throughput measured above on 1 or 2 threads ({two_core_peak:.1f})")
        names = [r["variant"] for r in rows]
        pairs = [("rlearn TD3, learn_threads=2, adaptive (default)", "SB3 TD3, torch threads=2"),
                 ("rlearn TD3, learn_threads=1", "SB3 TD3, torch threads=1")]
        if args.baseline_ref:
            pairs += [("rlearn TD3, learn_threads=1", f"rlearn TD3 @ {args.baseline_ref}, learn_threads=1"),
                      ("rlearn TD3, learn_threads=2, fixed", f"rlearn TD3 @ {args.baseline_ref}, learn_threads=2, fixed")]
        for a, b in pairs:
            if a in names and b in names:
                ratios = paired_ratios(rows, a, b)
                report.setdefault("step_paired", {})[f"{a} / {b}"] = ratios
                print(f"paired time ratio {a} / {b}: median {_median(ratios):.3f} "
                      f"(per repeat {', '.join(f'{r:.2f}' for r in ratios)})")

    if "speed" in sections:
        steps = 3000 if quick else s["total_steps"]
        starts = 1000 if quick else s["learning_starts"]
        print(f"\n== full runs: {steps} env steps, learning_starts {starts}, then 10 eval episodes; "
              f"{repeats} alternation(s) ==", flush=True)
        with checkout_of(args.baseline_ref) if args.baseline_ref else contextlib.nullcontext() as tree:
            result = speed(steps, starts, repeats, args.sb3_threads, args.rlearn_threads, tree, args.baseline_ref or "")
        report["speed"] = result
        rows = result["rows"]
        rl = rows[0]["env_steps_per_s"]
        print(_table([[r["variant"], r["seconds"], r["learn_seconds"], r["env_steps_per_s"], rl / r["env_steps_per_s"],
                       r["median_pair_ratio"], r["shared_return_mean"], r["returns"]] for r in rows],
                     ["variant", "seconds (median)", "of which gradient steps", "env steps/s",
                      f"{rows[0]['variant']} speed-up",
                      "median pair ratio", f"shared-start return ({SHARED_EVAL_EPISODES} ep, mean)",
                      "own eval returns (10 ep)"]))
        for r in rows[1:]:
            print(f"{rows[0]['variant']} minus {r['variant']}, shared-start return per seed: "
                  f"{r['shared_diff_mean']:+.1f} +- {r['shared_diff_se']:.1f} (mean +- standard error)")

    if "overhead" in sections:
        pairs = 10 if quick else 60
        result = overhead(pairs)
        report["overhead"] = result
        print(f"\n== monitoring overhead: collect -> buffer -> learner.train, {pairs} alternating pairs of blocks of "
              f"{result['block']} iterations (policy on 2 threads) ==")
        low, high = result["paired_iqr_pct"]
        print(_table([
            ["paired: median over pairs of (LogShowHook block / no-hooks block - 1)",
             f"{result['paired_slowdown_pct']:+.2f} % (interquartile range {low:+.2f} .. {high:+.2f} %)"],
            ["direct: time inside LogShowHook per iteration / no-hooks iteration",
             f"{result['direct_slowdown_pct']:+.2f} % ({result['hook_ms_per_iter'] * 1e3:.1f} us of "
             f"{result['no_hooks_ms']:.2f} ms)"],
        ], ["estimate", "slow-down"]))
        print("target: slow-down <= 2 %")

    if "learning" in sections:
        seeds = args.seeds if args.seeds is not None else ([0] if quick else [0, 1, 2])
        steps = 12_000 if quick else s["total_steps"]
        starts = 4000 if quick else s["learning_starts"]
        print(f"\n== learning: seeds {seeds}, {steps} env steps, learning_starts {starts}, eval every 1000 ==", flush=True)
        result = learning(seeds, steps, starts, 1000, args.rlearn_threads[0], args.out, sb3=args.sb3_curves)
        report["learning"] = result
        ok = all(v is not None and v >= -200 for v in result["finals"].values())
        print(f"final returns: {result['finals']}  -> target >= -200 on every seed: {'met' if ok else 'NOT met'}")
        if result["sb3_finals"]:
            print(f"SB3 final returns (same settings): {result['sb3_finals']}")
        print(f"curve: {result['csv']}, {result['png']}")

    args.out.mkdir(parents=True, exist_ok=True)
    name = "td3_bench_quick.json" if quick else "td3_bench.json"
    report["load_at_end"] = _load()
    previous: Dict[str, Any] = {}
    if (args.out / name).is_file():  # keep the sections this run did not measure
        try:
            previous = json.loads((args.out / name).read_text())
        except (OSError, ValueError):
            previous = {}
    with open(args.out / name, "w") as f:
        json.dump({**previous, **report}, f, indent=1, default=str)
    print(f"\nresults: {args.out / name}  (load average at end {_load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
