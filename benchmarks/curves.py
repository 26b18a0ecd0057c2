"""Learning-curve PNGs for the benchmarks, drawn by ``rlearn plot`` itself.

rlearn's runs already leave a ``metrics.jsonl`` in their work dirs. A comparison library's runs (SB3) are
written as work dirs of the same shape by :func:`write_reference_run` (a ``metrics.jsonl`` with
``train_iter``, ``envstep``, ``time`` and ``evaluator/episode_return_mean``, and a ``config.py`` naming the
experiment), so one ``rlearn plot`` call draws both libraries, one line per library with its seed band.

    from curves import plot_learning_curves, write_reference_run
    sb3_dirs = [write_reference_run(out / f"sb3_s{seed}", "sb3_td3", seed, points) for seed, points in ...]
    plot_learning_curves(rlearn_dirs + sb3_dirs, out / "td3_pendulum_learning.png", "Pendulum-v1: TD3")
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence, Tuple

RETURN_KEY = "evaluator/episode_return_mean"


def write_reference_run(work_dir: Path, exp_name: str, seed: int, points: Iterable[Tuple[int, float]],
                        times: Optional[Sequence[float]] = None, config: Optional[Mapping] = None) -> Path:
    """Write ``points`` (``(envstep, mean evaluation return)`` pairs) as a work dir ``rlearn plot`` reads.

    ``times`` (seconds since the run's start, one per point) fills the ``time`` column (0 without it);
    ``config`` adds keys to the ``config.py`` (``exp_name``, ``seed`` and ``reference = exp_name`` are always
    written: runs of one exp_name that differ only in seed form one line of the plot). Returns ``work_dir``.
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    points = list(points)
    times = list(times) if times is not None else [0.0] * len(points)
    if len(times) != len(points):
        raise ValueError(f"write_reference_run: {len(points)} points but {len(times)} times")
    with open(work_dir / "metrics.jsonl", "w") as fh:
        for i, ((envstep, value), t) in enumerate(zip(points, times)):
            row = {"train_iter": i, "envstep": int(envstep), "time": float(t), RETURN_KEY: float(value)}
            fh.write(json.dumps(row) + "\n")
    # ``reference`` keeps differently named reference runs apart (exp_name alone does not split groups)
    cfg = {"exp_name": exp_name, "seed": int(seed), "reference": exp_name, **dict(config or {})}
    (work_dir / "config.py").write_text(f"config = {cfg!r}\n")
    return work_dir


def plot_learning_curves(work_dirs: Sequence[Path], out: Path, title: str, key: str = RETURN_KEY,
                         x: str = "envstep") -> Optional[Path]:
    """Run ``rlearn plot WORK_DIR... -o out --title title --key key --x x`` in a subprocess (the command a
    user runs) and return ``out``, or None with the command's error printed when it failed (a benchmark's
    numbers do not depend on its picture)."""
    cmd = [sys.executable, "-m", "rlearn", "plot", *map(str, work_dirs), "-o", str(out), "--title", title,
           "--key", key, "--x", x]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"rlearn plot failed (exit {done.returncode}): {done.stderr.strip()}")
        return None
    print(done.stdout.strip())
    return Path(out)
