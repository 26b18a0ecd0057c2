"""The scores of the runs of experiment dirs, read as data from what every run writes: nothing in an
experiment dir is executed (:mod:`rlearn.experiments.membership`).

A run's **evaluation score** is the mean return of its last evaluation; its optional **training score** the
last value of a ``metrics.jsonl`` key. An experiment dir holds runs as sub-directories (any work dir with a
``metrics.jsonl`` or ``evaluations.jsonl``) or is a single run. A row of the wrong shape is skipped with a
``<file>:<line>: ...`` problem. Time is the run's **training time** (:func:`training_clock`), so the pauses
of a run interrupted and resumed do not count; a run without throughput rows falls back to seconds since its
first record.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from rlearn.experiments.child import ExperimentError, mean_return
from rlearn.experiments.membership import check_membership, read_config_literal
from rlearn.values import is_real

__all__ = ["RunScores", "Experiment", "load_experiment", "load_run", "align", "time_grid", "series", "interpolate",
           "read_config_literal", "read_rows", "number"]

Series = Tuple[List[float], List[float]]
#: the x axes a curve can have, and the row column each reads
X_COLUMNS = {"envstep": "envstep", "iter": "train_iter", "time": "time"}


def number(value: Any) -> Optional[float]:
    """``value`` as a float when it is a number (not a bool), else None."""
    return float(value) if is_real(value) else None


def series(rows: Sequence[Mapping[str, Any]], key: str, x: str = "envstep") -> Tuple[List[float], List[float]]:
    """The ``(xs, ys)`` of ``key`` in a run's rows, sorted by x: rows without ``key`` (or with a value that
    is not a finite number) are skipped; of several rows at the same x the last one counts; ``x="time"`` is
    seconds since the run's first row."""
    column = X_COLUMNS[x]
    points: Dict[float, float] = {}
    start = None
    for row in rows:
        at = number(row.get(column))
        if start is None and at is not None:
            start = at
        value = number(row.get(key))
        if value is None or at is None or not math.isfinite(value):
            continue
        points[at - (start if x == "time" and start is not None else 0.0)] = value
    return _curve(points)


def _curve(points: Mapping[float, float]) -> Series:
    xs = sorted(points)
    return xs, [points[x] for x in xs]


def interpolate(xs: List[float], ys: List[float], at: float) -> Optional[float]:
    """``ys`` at ``at``, linear between neighbours; None outside ``[xs[0], xs[-1]]``."""
    if not xs or at < xs[0] or at > xs[-1]:
        return None
    i = bisect.bisect_left(xs, at)
    if xs[i] == at:
        return ys[i]
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (at - x0) / (x1 - x0)


def read_rows(path: Path, problems: List[str]) -> List[Tuple[int, Dict[str, Any]]]:
    """``(line number, row)`` of each JSON object line of a JSON-lines file; a line that is not a JSON object
    is skipped with a ``<file>:<line>: ...`` entry in ``problems`` (a partly written last line silently)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as exc:
        problems.append(f"{path}: cannot be read ({exc.strerror or exc}); its rows are left out")
        return []
    lines = text.split("\n")
    rows = []
    for number_, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            if number_ < len(lines):  # the last piece without a newline is a row still being written
                problems.append(f"{path}:{number_}: not a JSON row; skipped")
            continue
        if not isinstance(row, dict):
            problems.append(f"{path}:{number_}: a JSON {type(row).__name__}, not a row object; skipped")
            continue
        rows.append((number_, row))
    return rows


def _evaluation_problem(row: Mapping[str, Any]) -> Optional[str]:
    """What is wrong with an ``evaluations.jsonl`` row (None when it is usable)."""
    for key in ("envstep", "time"):
        if number(row.get(key)) is None:
            return f"'{key}' is {row.get(key, '<absent>')!r}, not a number"
    returns = row.get("returns")
    if not isinstance(returns, list) or any(number(r) is None for r in returns):
        return f"'returns' is {str(returns)[:60]}, not a list of numbers"
    if "train_iter" in row and number(row["train_iter"]) is None:
        return f"'train_iter' is {row['train_iter']!r}, not a number"
    return None


def training_clock(metrics: Sequence[Mapping[str, Any]]) -> Optional[Callable[[float], float]]:
    """``train_iter -> seconds of training time`` from a run's log rows (train time from
    ``throughput/iters_per_sec``, plus ``time/eval_s`` and ``time/checkpoint_s``), linear between log rows;
    None when the rows carry no throughput."""
    cumulative: Dict[float, float] = {0.0: 0.0}
    total, previous = 0.0, 0.0
    for row in metrics:
        rate, at = number(row.get("throughput/iters_per_sec")), number(row.get("train_iter"))
        if rate is None or at is None or not math.isfinite(rate) or rate <= 0:
            continue
        if at > previous:
            total += (at - previous) / rate
        total += sum(max(0.0, number(row.get(k)) or 0.0) for k in ("time/eval_s", "time/checkpoint_s")
                     if math.isfinite(number(row.get(k)) or 0.0))
        previous = max(previous, at)
        cumulative[at] = total
    if len(cumulative) == 1:
        return None
    xs, ys = _curve(cumulative)
    return lambda it: interpolate(xs, ys, min(max(it, xs[0]), xs[-1])) or 0.0


@dataclass
class RunScores:
    """One run (its work dir ``path``): final scores (None where missing), ``(xs, values)`` curves over env
    steps and over seconds of training time (``clock`` ``"training"``; ``"wall"``: since its first record,
    pauses included), its last env step, and its status in ``sweep.json``."""

    path: Path
    eval_score: Optional[float]
    train_score: Optional[float]
    eval_by_step: Series
    eval_by_time: Series
    train_by_step: Series = field(default_factory=lambda: ([], []))
    train_by_time: Series = field(default_factory=lambda: ([], []))
    envstep: int = 0
    status: Optional[str] = None
    clock: str = "wall"
    problems: List[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class Experiment:
    """The runs of one experiment dir, labelled for the report: what its config says (environment, policy,
    budget; None when no run has a readable config), the runs left out and the problems met reading it."""

    label: str
    path: Path
    runs: List[RunScores]
    env_id: Optional[str] = None
    max_env_steps: Optional[int] = None
    policy: Optional[str] = None
    left_out: List[str] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)


def _natural_key(path: Path) -> Tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name))


def _is_run(path: Path) -> bool:
    return (path / "metrics.jsonl").is_file() or (path / "evaluations.jsonl").is_file()


def load_run(work_dir: Path, train_key: Optional[str] = None, status: Optional[str] = None) -> RunScores:
    """The scores of one work dir (see the module doc); rows it could not use are in ``problems``."""
    work_dir = Path(work_dir)
    problems: List[str] = []
    metric_rows = read_rows(work_dir / "metrics.jsonl", problems)
    metrics = [row for _, row in metric_rows]
    evaluations = []
    for line, row in read_rows(work_dir / "evaluations.jsonl", problems):
        if problem := _evaluation_problem(row):
            problems.append(f"{work_dir / 'evaluations.jsonl'}:{line}: {problem}; skipped")
        else:
            evaluations.append(row)
    clock = training_clock(metrics)
    if clock is not None and any(number(r.get("train_iter")) is None for r in evaluations):
        clock = None
    times = [number(r.get("time")) for r in metrics[:1] + evaluations[:1]]
    start = min((t for t in times if t is not None), default=0.0)

    def when(row: Mapping[str, Any]) -> float:
        return clock(float(row["train_iter"])) if clock is not None else float(row["time"]) - start

    by_step: Dict[float, float] = {}
    by_time: Dict[float, float] = {}
    for row in evaluations:
        mean = mean_return(row)
        if mean is not None and math.isfinite(mean):
            by_step[float(row["envstep"])] = mean
            by_time[when(row)] = mean
    eval_score = mean_return(evaluations[-1]) if evaluations else None
    run = RunScores(work_dir, eval_score, None, _curve(by_step), _curve(by_time), status=status,
                    clock="training" if clock is not None else "wall", problems=problems)
    run.envstep = int(max([number(r.get("envstep")) or 0 for r in metrics + evaluations], default=0))
    if train_key is not None:
        last_at: Dict[float, float] = {}
        xs_time: List[float] = []
        ys: List[float] = []
        for line, row in metric_rows:
            if train_key not in row:
                continue
            value, step = number(row[train_key]), number(row.get("envstep"))
            if value is None or step is None or (clock is None and number(row.get("time")) is None) \
                    or (clock is not None and number(row.get("train_iter")) is None):
                problems.append(f"{work_dir / 'metrics.jsonl'}:{line}: {train_key!r} is {str(row[train_key])[:60]} "
                                f"(envstep {row.get('envstep', '<absent>')!r}), not a number at an env step; skipped")
                continue
            if not math.isfinite(value):
                continue
            last_at[step] = value
            xs_time.append(when(row))
            ys.append(value)
        run.train_by_step = _curve(last_at)
        run.train_by_time = (xs_time, ys)
        run.train_score = run.train_by_step[1][-1] if run.train_by_step[1] else None
    return run


def _statuses(exp_dir: Path) -> Dict[str, str]:
    """``{work dir name: status}`` from ``sweep.json`` (empty when missing or not of that shape)."""
    try:
        runs = json.loads((exp_dir / "sweep.json").read_text(encoding="utf-8")).get("runs", {})
        return {str(r.get("work_dir")): str(r.get("status")) for r in runs.values() if isinstance(r, dict)}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def load_experiment(exp_dir: Path, train_key: Optional[str] = None, label: Optional[str] = None) -> Experiment:
    """The runs of ``exp_dir`` that belong to it (ExperimentError when it holds none)."""
    exp_dir = Path(exp_dir)
    if not exp_dir.is_dir():
        raise ExperimentError(f"{exp_dir}: no such directory")
    statuses = _statuses(exp_dir)
    dirs = [exp_dir] if _is_run(exp_dir) else sorted((p for p in exp_dir.iterdir() if p.is_dir() and _is_run(p)),
                                                     key=_natural_key)
    if not dirs:
        raise ExperimentError(f"{exp_dir}: no runs (no sub-directory with a metrics.jsonl or evaluations.jsonl)")
    membership = check_membership(exp_dir, dirs)
    if not membership.kept:
        raise ExperimentError(f"{exp_dir}: none of its {len(dirs)} runs belongs to the experiment of "
                              f"{membership.source} ({membership.left_out[0]})")
    from rlearn.config import flatten

    runs = [load_run(d, train_key, statuses.get(d.name)) for d in membership.kept]
    facts = flatten(membership.reference or {})
    budget = facts.get("train.max_env_steps")
    return Experiment(label or exp_dir.name, exp_dir, runs, facts.get("env.id"),
                      budget if isinstance(budget, (int, float)) else None, facts.get("policy.type"),
                      left_out=membership.left_out, problems=membership.warnings + [p for r in runs for p in r.problems])


def align(runs: Sequence[Series], grid: Optional[Sequence[float]] = None,
          hold_last: bool = False) -> Tuple[List[float], List[List[float]]]:
    """``(grid, values)`` with ``values[r][i]`` run ``r``'s curve at ``grid[i]`` (linear interpolation). The
    grid (default: the union of the runs' x values) is cut to the range that every run covers; with
    ``hold_last`` a run that ended keeps its last value up to the end of the longest run."""
    if not runs or any(not xs for xs, _ in runs):
        raise ExperimentError("a curve needs at least one point in every run")
    low, high = _span(runs, hold_last)
    if grid is None:
        grid = sorted({x for xs, _ in runs for x in xs if low <= x <= high})
    else:
        grid = [x for x in grid if low <= x <= high]
    values = [[interpolate(xs, ys, min(x, xs[-1]) if hold_last else x) for x in grid] for xs, ys in runs]
    return list(grid), values  # type: ignore[return-value]


def time_grid(runs: Sequence[Series], points: int = 50, hold_last: bool = False) -> List[float]:
    """``points`` evenly spaced seconds over the range every run covers (up to the longest run's end with
    ``hold_last``; one point when the range is a point)."""
    low, high = _span(runs, hold_last)
    if high <= low:
        return [low] if high == low else []
    return [low + (high - low) * i / (points - 1) for i in range(points)]


def _span(runs: Sequence[Series], hold_last: bool) -> Tuple[float, float]:
    """The range of x every run covers (up to the longest run's end with ``hold_last``)."""
    return max(xs[0] for xs, _ in runs), max(xs[-1] for xs, _ in runs) if hold_last else min(xs[-1] for xs, _ in runs)
