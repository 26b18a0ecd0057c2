"""Replay-buffer speed: rlearn's ``ReplayBuffer`` side by side with Stable-Baselines3's ``ReplayBuffer``.

Both buffers hold 200k transitions and return CPU torch tensors. Measured per call:

* ``sample(256)``: one training batch (the hot path of every off-policy update);
* ``add 1 step x N envs``: what a collector with ``collect_steps=1`` does between updates;
* ``add 1000 steps x N envs`` (rlearn only takes whole batches; SB3 is called once per step, as it must be).

Shapes: Pendulum-v1 (obs 3, action 1) and a MuJoCo-sized task (obs 17, action 6).

    .venv/bin/python benchmarks/bench_buffer.py           # full
    .venv/bin/python benchmarks/bench_buffer.py --quick   # fewer repeats, a few seconds

Times are the minimum over repeats of the mean per call (the least disturbed estimate on a shared
machine) in microseconds; the ratio is SB3 time / rlearn time (> 1: rlearn is faster).
Needs ``pip install -e '.[bench]'`` (stable-baselines3).
"""

from __future__ import annotations

import argparse
import timeit
from typing import Callable, Dict, List

import numpy as np
import torch
from gymnasium import spaces
from tabulate import tabulate

from rlearn.buffer import ReplayBuffer

try:
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer
except Exception as exc:  # noqa: BLE001 - the column is dropped without SB3
    SB3ReplayBuffer = None
    SB3_ERROR = f"{type(exc).__name__}: {exc}"
else:
    SB3_ERROR = ""

CAPACITY = 200_000
BATCH = 256


def per_call_us(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Minimum over ``repeat`` runs of the mean time of ``fn`` over ``number`` calls, in microseconds."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def transitions(rng: np.random.Generator, n: int, obs_dim: int, act_dim: int) -> Dict[str, np.ndarray]:
    return {
        "obs": rng.standard_normal((n, obs_dim)).astype(np.float32),
        "action": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
        "reward": rng.standard_normal(n).astype(np.float32),
        "next_obs": rng.standard_normal((n, obs_dim)).astype(np.float32),
        "terminated": (rng.random(n) < 0.01).astype(np.float32),
    }


def filled_rlearn(data: Dict[str, np.ndarray], obs_dim: int, act_dim: int) -> ReplayBuffer:
    buffer = ReplayBuffer(CAPACITY, (obs_dim,), (act_dim,), seed=0)
    buffer.add(data)
    return buffer


def filled_sb3(data: Dict[str, np.ndarray], obs_dim: int, act_dim: int, n_envs: int = 1):
    buffer = SB3ReplayBuffer(
        CAPACITY,  # SB3 divides its buffer_size by n_envs
        spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32),
        spaces.Box(-1.0, 1.0, (act_dim,), np.float32),
        device="cpu",
        n_envs=n_envs,
    )
    # filled through its arrays (its add() takes one step at a time; that cost is measured separately)
    rows = CAPACITY // n_envs
    buffer.observations[:] = data["obs"][: rows * n_envs].reshape(rows, n_envs, obs_dim)
    buffer.next_observations[:] = data["next_obs"][: rows * n_envs].reshape(rows, n_envs, obs_dim)
    buffer.actions[:] = data["action"][: rows * n_envs].reshape(rows, n_envs, act_dim)
    buffer.rewards[:] = data["reward"][: rows * n_envs].reshape(rows, n_envs)
    buffer.dones[:] = data["terminated"][: rows * n_envs].reshape(rows, n_envs)
    buffer.full = True
    return buffer


def bench_shape(name: str, obs_dim: int, act_dim: int, n_envs: int, number: int, repeat: int) -> List[list]:
    rng = np.random.default_rng(0)
    data = transitions(rng, CAPACITY, obs_dim, act_dim)
    ours = filled_rlearn(data, obs_dim, act_dim)
    rows: List[list] = []

    def row(operation: str, ours_us: float, sb3_us: float | None) -> None:
        ratio = f"{sb3_us / ours_us:.2f}x" if sb3_us is not None else "-"
        rows.append([name, operation, f"{ours_us:.1f}", "-" if sb3_us is None else f"{sb3_us:.1f}", ratio])

    sb3 = filled_sb3(data, obs_dim, act_dim, n_envs) if SB3ReplayBuffer is not None else None
    np.random.seed(0)
    row(f"sample({BATCH})", per_call_us(lambda: ours.sample(BATCH), number, repeat),
        per_call_us(lambda: sb3.sample(BATCH), number, repeat) if sb3 is not None else None)

    step = transitions(rng, n_envs, obs_dim, act_dim)
    infos = [{} for _ in range(n_envs)]
    row(f"add 1 step x {n_envs} envs", per_call_us(lambda: ours.add(step), number, repeat),
        per_call_us(lambda: sb3.add(step["obs"], step["next_obs"], step["action"], step["reward"],
                                    step["terminated"], infos), number, repeat) if sb3 is not None else None)

    chunk = transitions(rng, 1000 * n_envs, obs_dim, act_dim)
    chunk_2d = {key: value.reshape(1000, n_envs, *value.shape[1:]) for key, value in chunk.items()}

    def sb3_chunk() -> None:
        for t in range(1000):
            sb3.add(chunk_2d["obs"][t], chunk_2d["next_obs"][t], chunk_2d["action"][t], chunk_2d["reward"][t],
                    chunk_2d["terminated"][t], infos)

    small = max(1, number // 200)
    row(f"add 1000 steps x {n_envs} envs", per_call_us(lambda: ours.add(chunk_2d), small, repeat),
        per_call_us(sb3_chunk, small, repeat) if sb3 is not None else None)
    return rows


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a few seconds)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    number, repeat = (300, 5) if args.quick else (2000, 15)
    if SB3ReplayBuffer is None:
        print(f"stable-baselines3 unavailable ({SB3_ERROR}); showing rlearn only")
    rows: List[list] = []
    for name, obs_dim, act_dim, n_envs in (("Pendulum (3, 1)", 3, 1, 1), ("MuJoCo-sized (17, 6)", 17, 6, 4)):
        rows += bench_shape(name, obs_dim, act_dim, n_envs, number, repeat)
    print(f"ReplayBuffer, {CAPACITY} transitions stored, CPU, 1 torch thread; microseconds per call "
          f"(min over {repeat} repeats); ratio = SB3 / rlearn")
    print(tabulate(rows, headers=["shapes (obs, action)", "operation", "rlearn us", "SB3 us", "ratio"],
                   tablefmt="github", disable_numparse=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
