"""The scores of the runs of experiment dirs, read from what every run writes.

A run's **evaluation score** is the mean return of its last evaluation (``evaluations.jsonl``); its optional
**training score** is the last value of a ``metrics.jsonl`` key (by default the mean return of the last N
training episodes, logged by ``rlearn sweep --train-episodes N``). An experiment dir holds runs as
sub-directories (any work dir with a ``metrics.jsonl`` or ``evaluations.jsonl``) or is a single run. Curves
are aligned as ``rlearn plot`` does (:func:`align`); wall time is seconds since the run's first record.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from rlearn.experiments.child import ExperimentError, mean_return

__all__ = ["RunScores", "Experiment", "load_experiment", "align", "time_grid", "series", "interpolate"]

Series = Tuple[List[float], List[float]]
#: the x axes a curve can have, and the row column each reads
X_COLUMNS = {"envstep": "envstep", "iter": "train_iter", "time": "time"}


def series(rows: Sequence[Mapping[str, Any]], key: str, x: str = "envstep") -> Tuple[List[float], List[float]]:
    """The ``(xs, ys)`` of ``key`` in a run's rows, sorted by x: rows without ``key`` (or with a non-finite
    value) are skipped; of several rows at the same x the last one counts; ``x="time"`` is seconds since
    the run's first row."""
    column = X_COLUMNS[x]
    points: Dict[float, float] = {}
    start = None
    for row in rows:
        if start is None and column in row:
            start = float(row[column])
        value = row.get(key)
        if value is None or column not in row or not math.isfinite(float(value)):
            continue
        at = float(row[column]) - (start if x == "time" else 0.0)
        points[at] = float(value)
    xs = sorted(points)
    return xs, [points[v] for v in xs]


def interpolate(xs: List[float], ys: List[float], at: float) -> Optional[float]:
    """``ys`` at ``at``, linear between neighbours; None outside ``[xs[0], xs[-1]]``."""
    if not xs or at < xs[0] or at > xs[-1]:
        return None
    i = bisect.bisect_left(xs, at)
    if xs[i] == at:
        return ys[i]
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (at - x0) / (x1 - x0)


@dataclass
class RunScores:
    """One run (its work dir ``path``): final scores (None where missing), ``(xs, values)`` curves over env
    steps and over seconds since its first record, its last env step, and its status in ``sweep.json``."""

    path: Path
    eval_score: Optional[float]
    train_score: Optional[float]
    eval_by_step: Series
    eval_by_time: Series
    train_by_step: Series = field(default_factory=lambda: ([], []))
    train_by_time: Series = field(default_factory=lambda: ([], []))
    envstep: int = 0
    status: Optional[str] = None

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class Experiment:
    """The runs of one experiment dir, labelled for the report."""

    label: str
    path: Path
    runs: List[RunScores]
    env_id: Optional[str] = None
    max_env_steps: Optional[int] = None


def _natural_key(path: Path) -> Tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name))


def _is_run(path: Path) -> bool:
    return (path / "metrics.jsonl").is_file() or (path / "evaluations.jsonl").is_file()


def load_run(work_dir: Path, train_key: Optional[str] = None, status: Optional[str] = None) -> RunScores:
    """The scores of one work dir (see the module doc)."""
    from rlearn.hooks.eval_state import read_evaluations
    from rlearn.writers.jsonl import read_jsonl

    metrics = read_jsonl(work_dir / "metrics.jsonl") if (work_dir / "metrics.jsonl").is_file() else []
    evaluations = read_evaluations(work_dir / "evaluations.jsonl") if (work_dir / "evaluations.jsonl").is_file() else []
    times = [float(r["time"]) for r in (metrics[:1] + evaluations[:1]) if "time" in r]
    start = min(times) if times else 0.0
    by_step: Dict[float, float] = {}
    by_time: Dict[float, float] = {}
    for row in evaluations:
        mean = mean_return(row)
        if mean is not None:
            by_step[float(row["envstep"])] = mean
            by_time[float(row["time"]) - start] = mean
    eval_by_step = (sorted(by_step), [by_step[k] for k in sorted(by_step)])
    eval_by_time = (sorted(by_time), [by_time[k] for k in sorted(by_time)])
    eval_score = mean_return(evaluations[-1]) if evaluations else None
    run = RunScores(work_dir, eval_score, None, eval_by_step, eval_by_time, status=status)
    run.envstep = int(max([r.get("envstep", 0) for r in metrics + evaluations], default=0))
    if train_key is not None:
        run.train_by_step = series(metrics, train_key, "envstep")
        xs, ys = [], []
        for row in metrics:
            value = row.get(train_key)
            if value is not None and "time" in row and math.isfinite(float(value)):
                xs.append(float(row["time"]) - start)
                ys.append(float(value))
        run.train_by_time = (xs, ys)
        run.train_score = run.train_by_step[1][-1] if run.train_by_step[1] else None
    return run


def load_experiment(exp_dir: Path, train_key: Optional[str] = None, label: Optional[str] = None) -> Experiment:
    """The runs of ``exp_dir`` (ExperimentError when it holds none)."""
    exp_dir = Path(exp_dir)
    if not exp_dir.is_dir():
        raise ExperimentError(f"{exp_dir}: no such directory")
    statuses: Dict[str, str] = {}
    manifest = exp_dir / "sweep.json"
    if manifest.is_file():
        try:
            runs = json.loads(manifest.read_text(encoding="utf-8")).get("runs", {})
            statuses = {str(r.get("work_dir")): str(r.get("status")) for r in runs.values()}
        except (OSError, json.JSONDecodeError, AttributeError):
            statuses = {}
    if _is_run(exp_dir):
        dirs = [exp_dir]
    else:
        dirs = sorted((p for p in exp_dir.iterdir() if p.is_dir() and _is_run(p)), key=_natural_key)
    if not dirs:
        raise ExperimentError(f"{exp_dir}: no runs (no sub-directory with a metrics.jsonl or evaluations.jsonl)")
    runs = [load_run(d, train_key, statuses.get(d.name)) for d in dirs]
    env_id, max_steps = _config_facts(exp_dir, dirs[0])
    return Experiment(label or exp_dir.name, exp_dir, runs, env_id, max_steps)


def _config_facts(exp_dir: Path, first_run: Path) -> Tuple[Optional[str], Optional[int]]:
    """The environment id and ``train.max_env_steps`` from the experiment's (or its first run's) config.py."""
    import runpy

    for candidate in (exp_dir / "config.py", first_run / "config.py"):
        if candidate.is_file():
            try:
                cfg = runpy.run_path(str(candidate))["config"]
                return str(cfg["env"]["id"]), int(cfg["train"]["max_env_steps"])
            except Exception:  # noqa: BLE001 - only labels are lost
                continue
    return None, None


def align(runs: Sequence[Series], grid: Optional[Sequence[float]] = None) -> Tuple[List[float], List[List[float]]]:
    """``(grid, values)`` with ``values[r][i]`` run ``r``'s curve at ``grid[i]`` (linear interpolation). The
    grid (default: the union of the runs' x values) is cut to the range that every run covers."""
    if not runs or any(not xs for xs, _ in runs):
        raise ExperimentError("a curve needs at least one point in every run")
    low = max(xs[0] for xs, _ in runs)
    high = min(xs[-1] for xs, _ in runs)
    if grid is None:
        grid = sorted({x for xs, _ in runs for x in xs if low <= x <= high})
    else:
        grid = [x for x in grid if low <= x <= high]
    values = [[interpolate(xs, ys, x) for x in grid] for xs, ys in runs]
    return list(grid), values  # type: ignore[return-value]


def time_grid(runs: Sequence[Series], points: int = 50) -> List[float]:
    """``points`` evenly spaced seconds over the range every run covers (one point when they share one)."""
    low = max(xs[0] for xs, _ in runs)
    high = min(xs[-1] for xs, _ in runs)
    if high <= low:
        return [low] if high == low else []
    return [low + (high - low) * i / (points - 1) for i in range(points)]
