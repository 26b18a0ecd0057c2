"""``rlearn plot WORK_DIR... [-o curves.png] [--key KEY] [--x envstep|iter|time]``: learning curves as a PNG, one
line per group of runs whose ``config.py`` differs only in :data:`DEFAULT_IGNORED` keys (the seeds of one
experiment): their mean and a min-max (or std) band. :func:`prepare_curves` prepares, :func:`plot_curves` draws."""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from rlearn.commands import fail
from rlearn.experiments.scores import X_COLUMNS, interpolate, read_config_literal, series

HELP = "plot learning curves from work dirs' metrics.jsonl (mean and band over seeds) into a PNG"

#: ``--x`` choices -> the metrics.jsonl column
X_LABELS = {"envstep": "env steps", "iter": "train iterations", "time": "wall time"}
DEFAULT_KEY = "evaluator/episode_return_mean"
#: config keys that do not make two runs different experiments
DEFAULT_IGNORED = ("seed", "exp_name", "learner.writers", "eval.video", "eval.video_freq")
#: a legend label is wrapped onto lines of at most this many characters (never cut)
LABEL_WIDTH = 60

EPILOG = """\
examples:
  rlearn plot work_dirs/td3_pendulum                           # one run, evaluation return over env steps
  rlearn plot work_dirs/td3_s0 work_dirs/td3_s1 work_dirs/td3_s2 -o td3.png
  rlearn plot work_dirs/* --key collector/episode_return_avg --x iter --band std
"""


class PlotError(ValueError):
    """A work dir or key that cannot be plotted; the message names it."""


# ------------------------------------------------------------------------------------------- data
@dataclass
class Run:
    """One work dir: its name, its config (None without ``config.py``) and its ``metrics.jsonl`` rows."""

    path: Path
    name: str
    config: Optional[Dict[str, Any]]
    rows: List[Dict[str, Any]]


@dataclass
class Curve:
    """One line of the plot: a group of runs (their work dirs) at the x values ``x``: ``mean``, the band from
    ``low`` to ``high``, and ``count``, how many runs contribute at each x."""

    label: str
    x: List[float]
    mean: List[float]
    low: List[float]
    high: List[float]
    count: List[int]
    runs: List[str] = field(default_factory=list)


def load_run(work_dir: Path) -> Run:
    """Read ``metrics.jsonl`` (PlotError without it; damaged lines skipped) and ``config.py`` (without running it)
    of ``work_dir``; each problem is a warning on stderr."""
    from rlearn.writers.jsonl import JsonlWriter

    work_dir = Path(work_dir)
    metrics = work_dir / "metrics.jsonl"
    if not metrics.is_file():
        raise PlotError(f"{work_dir}: no metrics.jsonl (is it a work dir of a run with the 'jsonl' writer?)")
    config = None
    config_file = work_dir / "config.py"
    if config_file.is_file():
        try:
            config = read_config_literal(config_file)
        except (OSError, SyntaxError, ValueError) as exc:  # a broken config only loses the grouping
            print(f"rlearn plot: warning: {config_file} is not a config rlearn wrote ({exc}); the run is plotted "
                  "on its own", file=sys.stderr)
    name = str(config.get("exp_name")) if config and config.get("exp_name") else work_dir.name
    try:
        rows, problems = JsonlWriter(metrics).read()
    except OSError as exc:
        raise PlotError(f"{metrics}: cannot read it ({exc.strerror or exc})") from exc
    for problem in problems:
        print(f"rlearn plot: warning: {problem}", file=sys.stderr)
    return Run(work_dir, name, config, rows)


def aggregate(runs: Sequence[Tuple[List[float], List[float]]], band: str = "minmax") -> Tuple[List[float], ...]:
    """``(x, mean, low, high, count)`` over the runs' ``(xs, ys)``: at each x of their union, the runs covering it,
    interpolated. ``band``: ``minmax``, ``std`` (mean -+ the population std) or ``none`` (low = high = mean)."""
    grid = sorted({v for xs, _ in runs for v in xs})
    out: Tuple[List[float], ...] = ([], [], [], [], [])
    for at in grid:
        values = [v for v in (interpolate(xs, ys, at) for xs, ys in runs) if v is not None]
        mean = sum(values) / len(values)
        if band == "minmax":
            low, high = min(values), max(values)
        elif band == "std":
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
            low, high = mean - std, mean + std
        else:
            low = high = mean
        for column, value in zip(out, (at, mean, low, high, len(values))):
            column.append(value)
    return out


def _flat(config: Optional[Mapping[str, Any]], ignored: Sequence[str]) -> Optional[Dict[str, Any]]:
    if config is None:
        return None
    from rlearn.config import flatten

    flat = flatten(config)
    return {k: v for k, v in flat.items() if k not in ignored and not any(k.startswith(f"{i}.") for i in ignored)}


def group_runs(runs: Sequence[Run], ignored: Sequence[str] = DEFAULT_IGNORED) -> List[Tuple[str, List[Run]]]:
    """Runs grouped by their config without the ``ignored`` keys (first-seen order), each labelled by its exp_name
    when that tells the groups apart, else by the config values that do (``policy.lr=0.001``), wrapped; a run
    without ``config.py`` is a group of its own named after its directory."""
    groups: Dict[str, List[Run]] = {}
    flats: Dict[str, Optional[Dict[str, Any]]] = {}
    for run in runs:
        flat = _flat(run.config, ignored)
        ident = json.dumps(flat, sort_keys=True, default=repr) if flat is not None else f"dir:{run.path}"
        groups.setdefault(ident, []).append(run)
        flats[ident] = flat
    known = [flat for flat in flats.values() if flat is not None]
    differing = sorted({k for flat in known for k in flat if any(other.get(k, object()) != flat.get(k) for other in known)})
    group_names = [{run.name for run in members} for members in groups.values()]
    named_apart = len(groups) == len(set().union(*group_names)) > 1 and all(len(n) == 1 for n in group_names)
    labelled = []
    for ident, members in groups.items():
        flat = flats[ident]
        if flat is None:
            label = members[0].path.name
        elif named_apart:
            label = members[0].name
        elif len(groups) == 1 or not differing:
            label = ", ".join(sorted({run.name for run in members}))
        else:
            label = "\n".join(textwrap.wrap(", ".join(f"{k}={flat.get(k, '-')}" for k in differing), LABEL_WIDTH,
                                             break_long_words=False, break_on_hyphens=False))
        labelled.append((label, members))
    return labelled


def prepare_curves(runs: Sequence[Run], key: str = DEFAULT_KEY, x: str = "envstep", band: str = "minmax",
                   ignored: Sequence[str] = DEFAULT_IGNORED) -> Tuple[List[Curve], List[str]]:
    """The curves to draw and the warnings (runs without ``key``); a PlotError listing the keys when none has it."""
    if x not in X_COLUMNS:
        raise PlotError(f"--x must be one of {', '.join(X_COLUMNS)}, got {x!r}")
    curves: List[Curve] = []
    warnings: List[str] = []
    for label, members in group_runs(runs, ignored):
        found = [(str(run.path), series(run.rows, key, x)) for run in members]
        warnings += [f"{path}: no value of {key!r} in metrics.jsonl; left out" for path, (xs, _) in found if not xs]
        data = [(path, xy) for path, xy in found if xy[0]]
        if data:
            label = f"{label} ({len(data)} runs)" if len(data) > 1 else label
            curves.append(Curve(label, *aggregate([xy for _, xy in data], band), [path for path, _ in data]))
    if not curves:
        keys = sorted({k for run in runs for row in run.rows for k in row if k not in ("train_iter", "envstep", "time")})
        raise PlotError(f"no run has a value of {key!r}; keys in these metrics.jsonl: {', '.join(keys) or '(none)'}")
    return curves, warnings


# ------------------------------------------------------------------------------------------- drawing
def _time_unit(curves: Sequence[Curve]) -> Tuple[float, str]:
    longest = max((c.x[-1] for c in curves if c.x), default=0.0)
    if longest >= 2 * 3600:
        return 3600.0, "h"
    if longest >= 120:
        return 60.0, "min"
    return 1.0, "s"


def draw_curves(curves: Sequence[Curve], key: str, x: str, title: Optional[str] = None) -> Any:
    """A matplotlib ``Figure`` of ``curves``: each a mean line (a marker for a single point) and its band."""
    from matplotlib.figure import Figure

    scale, unit = _time_unit(curves) if x == "time" else (1.0, "")
    fig = Figure(figsize=(7.5, 4.5), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    for curve in curves:
        xs = [v / scale for v in curve.x]
        (line,) = ax.plot(xs, curve.mean, label=curve.label, linewidth=1.8, marker="o" if len(xs) == 1 else None)
        if any(lo != hi for lo, hi in zip(curve.low, curve.high)):
            ax.fill_between(xs, curve.low, curve.high, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel(X_LABELS[x] + (f" ({unit})" if unit else ""))
    ax.set_ylabel(key)
    ax.set_title(title or key)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    return fig


def plot_curves(curves: Sequence[Curve], key: str, x: str, out: Path, title: Optional[str] = None) -> Path:
    """Draw ``curves`` into the PNG ``out`` (atomically, folders created) and return it; a
    :class:`rlearn.fileio.FileWriteError` names the path and the cause when it cannot be written."""
    from rlearn.fileio import atomic_write_bytes

    image = io.BytesIO()
    draw_curves(curves, key, x, title).savefig(image, format="png")
    return atomic_write_bytes(Path(out), image.getvalue())


# ------------------------------------------------------------------------------------------- command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``rlearn plot`` (no heavy imports here)."""
    parser.add_argument("work_dirs", nargs="+", metavar="WORK_DIR", help="work dirs holding a metrics.jsonl")
    parser.add_argument("-o", "--output", default="curves.png", metavar="PNG", help="the image (default: curves.png)")
    parser.add_argument("--key", default=DEFAULT_KEY, help=f"the metric to plot (default: {DEFAULT_KEY})")
    parser.add_argument("--x", choices=list(X_COLUMNS), default="envstep",
                        help="x axis: env steps, train iterations or wall time since the run's first log "
                             "(default: envstep)")
    parser.add_argument("--band", choices=["minmax", "std", "none"], default="minmax",
                        help="shaded band over the runs of a group: min to max (default), mean +- std, or none")
    parser.add_argument("--ignore", action="extend", nargs="+", default=[], metavar="KEY",
                        help="more config keys that do not tell experiments apart (seed and exp_name never do)")
    parser.add_argument("--title", default=None, help="the plot's title (default: the key)")


def run(args: argparse.Namespace) -> int:
    """Load the runs, prepare the curves, draw the PNG; exit code 2 for a bad work dir or key."""
    try:
        runs = [load_run(Path(d)) for d in args.work_dirs]
        curves, warnings = prepare_curves(runs, args.key, args.x, args.band, DEFAULT_IGNORED + tuple(args.ignore))
    except PlotError as exc:
        return fail("plot", exc)
    for warning in warnings:
        print(f"rlearn plot: warning: {warning}", file=sys.stderr)
    try:
        out = plot_curves(curves, args.key, args.x, Path(args.output), args.title)
    except OSError as exc:  # FileWriteError: one line naming the path and the cause
        return fail("plot", exc, 1)
    print(f"wrote {out}: {args.key} over {X_LABELS[args.x]}, " + "; ".join(
        c.label.replace("\n", " ") + ("" if len(c.runs) > 1 else f" ({c.runs[0]})") for c in curves))
    return 0
