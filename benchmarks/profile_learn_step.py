"""Where the time of one off-policy learn step goes at MuJoCo scale: TD3 and SAC on HalfCheetah-v5's shapes
(17-d observations, 6-d actions), the bundled configs' networks, batch 256, sampled from a real ``ReplayBuffer``.

Two views per algorithm, on ``--threads`` torch threads (default 1):

* **torch profiler**: the operators' self CPU time, summed over ``--iters`` steps, the top ``--top`` of them and
  the shares of the main families (matrix products ``addmm``/``mm``, elementwise and activation kernels, the
  Adam update, ``lerp`` of the target networks, copies);
* **cProfile**: cumulative seconds of the Python functions that make up a step (sampling, the batch check, the
  target, the critic and actor updates, the optimizer step, the Polyak update).

    .venv/bin/python benchmarks/profile_learn_step.py                 # TD3 and SAC, 1 thread, 300 steps each
    .venv/bin/python benchmarks/profile_learn_step.py --algos sac --threads 2

Needs no MuJoCo: the spaces are HalfCheetah-v5's, built directly. Prints the tables and the load average.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from typing import Any, Dict, Optional, Sequence

import numpy as np

OBS_DIM, ACT_DIM, BATCH = 17, 6, 256
#: the bundled HalfCheetah configs' networks
HIDDEN = {"td3": [400, 300], "sac": [256, 256]}
FAMILIES = {
    "matrix products": ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"),
    "Adam update": ("aten::_fused_adam_", "aten::_foreach_", "aten::addcdiv", "aten::addcmul", "aten::lerp_",
                    "aten::sqrt", "aten::div_", "aten::mul_", "aten::add_"),
    "copies / gathers": ("aten::copy_", "aten::index", "aten::take", "aten::cat", "aten::stack", "aten::clone",
                         "aten::to", "aten::_to_copy"),
}


def make_policy(algo: str) -> Any:
    from gymnasium import spaces

    from rlearn.registry import get_policy_class

    obs_space = spaces.Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float64)
    act_space = spaces.Box(-1.0, 1.0, shape=(ACT_DIM,), dtype=np.float32)
    return get_policy_class(algo)(dict(hidden_sizes=HIDDEN[algo], batch_size=BATCH, learning_starts=0), obs_space,
                                  act_space, seed=0)


def make_buffer(n: int = 20_000) -> Any:
    from rlearn.buffer import ReplayBuffer

    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(n, (OBS_DIM,), (ACT_DIM,), seed=0)
    buffer.add(dict(obs=rng.normal(size=(n, OBS_DIM)).astype(np.float32),
                    action=rng.uniform(-1, 1, size=(n, ACT_DIM)).astype(np.float32),
                    reward=rng.normal(size=n).astype(np.float32),
                    next_obs=rng.normal(size=(n, OBS_DIM)).astype(np.float32), terminated=np.zeros(n, np.float32)))
    return buffer


#: the parts of a step, as (file ending, function name): their cumulative time per step is reported
PARTS = [
    ("rlearn/buffer/replay.py", "sample"),
    ("rlearn/rl/replay_batch.py", "check_replay_batch"),
    ("compute_target", "compute_target"),
    ("rlearn/nn/functional.py", "mlp"),
    ("torch/_tensor.py", "backward"),
    ("rlearn/optim/adam_step.py", "step"),
    ("rlearn/optim/adam_step.py", "zero_grad"),
    ("rlearn/optim/polyak.py", "polyak_update_"),
    ("rlearn/optim/clip.py", "clip_grad_norm_"),
]


def parts_ms(stats: pstats.Stats, steps: int) -> Dict[str, float]:
    """Cumulative milliseconds per step of each of :data:`PARTS` (a part called inside another counts in both)."""
    out: Dict[str, float] = {}
    for (filename, _, function), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        for ending, name in PARTS:
            if function == name and (filename.endswith(ending) or ending == name):
                key = f"{ending.split('/')[-1].removesuffix('.py')}:{name}" if ending != name else name
                out[key] = out.get(key, 0.0) + cumulative / steps * 1e3
    return out


def family_of(name: str) -> Optional[str]:
    for family, prefixes in FAMILIES.items():
        if any(name.startswith(prefix) for prefix in prefixes):
            return family
    return None


def profile(algo: str, iters: int, threads: int, top: int) -> Dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    torch.set_num_threads(threads)
    policy, buffer = make_policy(algo), make_buffer()
    for _ in range(30):  # warm-up: optimizer state, the thread chooser's first measurements
        policy._forward_learn(buffer.sample(BATCH))
    begin = time.perf_counter()
    for _ in range(iters):
        policy._forward_learn(buffer.sample(BATCH))
    plain_ms = (time.perf_counter() - begin) / iters * 1e3

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iters):
            policy._forward_learn(buffer.sample(BATCH))
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    families: Dict[str, float] = {}
    for e in events:
        family = family_of(e.key) or "other"
        families[family] = families.get(family, 0.0) + e.self_cpu_time_total
    ops = [(e.key, e.count / iters, e.self_cpu_time_total / iters / 1e3, e.self_cpu_time_total / total)
           for e in events[:top]]

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(iters):
        policy._forward_learn(buffer.sample(BATCH))
    profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.sort_stats("cumulative").print_stats(28)
    total_ms = sum(ct for (f, _, name), (_, _, _, ct, _) in stats.stats.items()  # type: ignore[attr-defined]
                   if name == "_forward_learn") / iters * 1e3
    return dict(algo=algo, threads=threads, iters=iters, step_ms=plain_ms, ops=ops, parts=parts_ms(stats, iters),
                profiled_step_ms=total_ms,
                families={k: v / total for k, v in sorted(families.items(), key=lambda kv: -kv[1])},
                cprofile=stream.getvalue())


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", default=["td3", "sac"], choices=sorted(HIDDEN))
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--no-cprofile", action="store_true", help="only the operator table")
    args = parser.parse_args(argv)
    for algo in args.algos:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        result = profile(algo, args.iters, args.threads, args.top)
        print(f"\n=== {algo.upper()} learn step, obs {OBS_DIM}, act {ACT_DIM}, {HIDDEN[algo]}, batch {BATCH}, "
              f"{args.threads} thread(s): {result['step_ms']:.2f} ms per step without the profiler; load {load}")
        print("operator families (share of self CPU time): " + ", ".join(
            f"{name} {share:.0%}" for name, share in result["families"].items()))
        print(f"{'operator':40s} {'calls/step':>10s} {'ms/step':>8s} {'share':>6s}")
        for name, calls, ms, share in result["ops"]:
            print(f"{name[:40]:40s} {calls:10.1f} {ms:8.3f} {share:6.1%}")
        print(f"parts (cProfile, ms per step of a {result['profiled_step_ms']:.2f} ms _forward_learn; sampling is "
              "outside it): " + ", ".join(f"{name} {ms:.2f}" for name, ms in result["parts"].items()))
        if not args.no_cprofile:
            print(result["cprofile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
