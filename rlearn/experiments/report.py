"""``rlearn report``: which experiment is better, and how sure we are, as Markdown with PNGs (docs/experiments.md).

For each score (:mod:`scores`): IQM, median, mean and optimality gap with 95 % CIs, the probability of
improvement of each pair, performance profiles and IQM curves against env steps and time (:mod:`stats`).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlearn.experiments import figures, stats
from rlearn.experiments.child import ExperimentError
from rlearn.experiments.membership import describe_budget
from rlearn.experiments.scores import Experiment, align, load_experiment, time_grid

__all__ = ["ReportOptions", "ScoreSection", "build_report", "write_report", "verdict", "warnings_of", "MIN_RUNS"]


@dataclass
class ReportOptions:
    """Options of :func:`build_report` (the ``rlearn report`` arguments)."""

    reps: int = 2000
    #: resamples of the performance profiles and the curves (one bootstrap per threshold or point: costly)
    curve_reps: int = 2000
    seed: int = 0
    train_key: Optional[str] = None
    normalize: Optional[Tuple[float, float]] = None
    target: Optional[float] = None
    profile_points: int = 101


@dataclass
class ScoreSection:
    """The statistics of one kind of score (``evaluation`` or ``training``)."""

    kind: str
    label: str
    scores: Dict[str, List[float]]
    target: Optional[float]
    aggregates: Dict[str, Dict[str, stats.Estimate]]
    improvement: Dict[Tuple[str, str], stats.Estimate]
    taus: List[float]
    profiles: Dict[str, Tuple[np.ndarray, np.ndarray]]
    curves: Dict[str, Dict[str, Tuple[List[float], np.ndarray, np.ndarray]]] = field(default_factory=dict)
    left_out: List[str] = field(default_factory=list)
    #: what the time axis measures
    time_axis: str = ""
    #: runs or experiments a curve could not show
    curve_notes: List[str] = field(default_factory=list)


def _default_target(experiments: Sequence[Experiment]) -> Optional[float]:
    """The environments' common ``reward_threshold`` (gymnasium's registry), or None. Only registered ids
    are looked up: a ``module:Env-v0`` id would make some gymnasium versions import ``module``."""
    import gymnasium

    thresholds = set()
    for exp in experiments:
        registered = isinstance(exp.env_id, str) and ":" not in exp.env_id
        try:
            thresholds.add(gymnasium.spec(exp.env_id).reward_threshold if registered else None)
        except Exception:  # noqa: BLE001 - an unregistered env has no threshold
            thresholds.add(None)
    return thresholds.pop() if len(thresholds) == 1 else None


def _section(kind: str, experiments: Sequence[Experiment], options: ReportOptions) -> Optional[ScoreSection]:
    """The statistics of one kind of score; None when no run has a finite score of that kind."""
    low, span = (options.normalize[0], options.normalize[1] - options.normalize[0]) if options.normalize else (0.0, 1.0)
    norm = (lambda v: (v - low) / span)
    scores: Dict[str, List[float]] = {}
    by_step: Dict[str, List[Tuple[List[float], List[float]]]] = {}
    by_time: Dict[str, List[Tuple[List[float], List[float]]]] = {}
    left_out: List[str] = []
    clocks: Counter = Counter()
    prefix = "eval" if kind == "evaluation" else "train"
    for exp in experiments:
        values, steps, times = [], [], []
        for run in exp.runs:
            score, step_curve, time_curve = (getattr(run, prefix + name) for name in ("_score", "_by_step", "_by_time"))
            if score is None:
                left_out.append(f"{run.path}: left out, no {kind} score")
                continue
            if not math.isfinite(score):
                left_out.append(f"{run.path}: left out, its {kind} score is {score} (not a finite number)")
                continue
            values.append(norm(score))
            steps.append((step_curve[0], [norm(v) for v in step_curve[1]]))
            times.append((time_curve[0], [norm(v) for v in time_curve[1]]))
            clocks[run.clock] += 1
        if values:
            scores[exp.label], by_step[exp.label], by_time[exp.label] = values, steps, times
    if not scores:
        return None
    target = options.target if options.target is not None else (1.0 if options.normalize else _default_target(experiments))
    matrices = {name: np.asarray(values, dtype=np.float64).reshape(-1, 1) for name, values in scores.items()}
    all_scores = np.concatenate(list(matrices.values()))
    taus = np.linspace(float(all_scores.min()), float(all_scores.max()), options.profile_points)
    label = "normalised " if options.normalize else ""
    label += "evaluation return" if kind == "evaluation" else f"{options.train_key}"
    section = ScoreSection(
        kind, label, scores, target,
        stats.aggregate_estimates(matrices, target, options.reps, options.seed),
        stats.improvement_probabilities(matrices, options.reps, options.seed),
        [float(t) for t in taus],
        stats.performance_profiles(matrices, taus, min(options.reps, options.curve_reps), options.seed),
        left_out=left_out,
    )
    section.time_axis = TIME_AXIS if not clocks["wall"] else (
        f"seconds since each run's first record ({clocks['wall']} of {sum(clocks.values())} runs have no throughput "
        "rows to measure training time: their pauses count)")
    for axis, data in (("envstep", by_step), ("time", by_time)):
        grids, arrays = {}, {}
        for name, runs in data.items():
            hold = axis == "time"
            usable = [r for r in runs if r[0]]
            if len(usable) < len(runs):
                section.curve_notes.append(f"{axis} curve of {name}: {len(runs) - len(usable)} run(s) without a point left out")
            if not usable:
                continue
            grid, values = align(usable, time_grid(usable, hold_last=True) if hold else None, hold_last=hold)
            if grid:
                grids[name] = grid
                arrays[name] = np.asarray(values, dtype=np.float64)[:, None, :]  # runs x 1 task x points
                if cut := sum(1 for xs, _ in usable if xs[-1] > grid[-1]):
                    section.curve_notes.append(f"{axis} curve of {name}: ends at {grid[-1]:g} env steps, where its "
                                               f"shortest run ends; the later evaluations of {cut} run(s) are not on it")
            else:
                section.curve_notes.append(f"{axis} curve of {name}: its runs share no range of x; not drawn")
        estimates = stats.iqm_curves(arrays, min(options.reps, options.curve_reps), options.seed)
        section.curves[axis] = {name: (grids[name], *estimates[name]) for name in estimates}
    return section


def build_report(exp_dirs: Sequence[Path], options: ReportOptions) -> Tuple[List[Experiment], List[ScoreSection]]:
    """Load the experiments and compute every section (ExperimentError for an unusable dir, or when no run
    has a finite score)."""
    stats.require_rliable()
    if options.reps < 10:
        raise ExperimentError(f"--reps must be >= 10, got {options.reps}")
    if options.normalize and options.normalize[1] <= options.normalize[0]:
        raise ExperimentError(f"--normalize LOW:HIGH needs LOW < HIGH, got {options.normalize}")
    experiments = []
    for path in map(Path, exp_dirs):
        label = str(path) if any(e.label == path.name for e in experiments) else path.name
        experiments.append(load_experiment(path, options.train_key, label))
    kinds = ("evaluation", "training") if options.train_key else ("evaluation",)
    sections = [s for s in (_section(k, experiments, options) for k in kinds) if s is not None]
    if not sections:
        raise ExperimentError("no run has a finite evaluation score (evaluations.jsonl) or training score to report"
                              + (f" ({sum(len(e.runs) for e in experiments)} runs read)" if experiments else ""))
    return experiments, sections


def warnings_of(experiments: Sequence[Experiment], sections: Sequence[ScoreSection]) -> List[str]:
    """Every run left out and every row skipped, one line each, for the command to print."""
    lines = [line for e in experiments for line in (*e.problems, *e.left_out)]
    for s in sections:
        lines += [line for line in s.left_out if line not in lines]
        lines += s.curve_notes
    return lines


# ------------------------------------------------------------------------------------------- writing
#: fewer runs than this per experiment: its bootstrap intervals are called unreliable and a verdict tentative
MIN_RUNS = 10
TIME_AXIS = "training time (train, evaluation and checkpoint time of the runs; pauses between a stop and a resume left out)"


def _fmt(value: float) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{value:.4g}"


def _estimate(e: stats.Estimate) -> str:
    return "-" if not np.isfinite(e.value) else f"{_fmt(e.value)} [{_fmt(e.low)}, {_fmt(e.high)}]"


def _collapsed(e: stats.Estimate) -> bool:
    return bool(np.isfinite(e.low) and np.isfinite(e.high) and e.high - e.low <= 1e-12 * max(1.0, abs(e.high)))


def verdict(x: str, y: str, e: stats.Estimate, runs: Tuple[int, int] = (MIN_RUNS, MIN_RUNS)) -> str:
    """One sentence on ``P(X > Y)`` from ``runs`` = (runs of X, runs of Y): which is better, and whether the CI
    excludes a coin flip (0.5). No verdict from an interval that collapsed to a point (every resample gave
    the same value, which measures nothing); with fewer than :data:`MIN_RUNS` runs a verdict says it is
    tentative."""
    interval = f"95 % CI [{e.low:.2f}, {e.high:.2f}]"
    if _collapsed(e):
        every = (f"every run of {x} scored above every run of {y}" if e.value == 1.0 else
                 f"every run of {y} scored at least as high as every run of {x}" if e.value == 0.0 else
                 "the resamples all gave the same value")
        return (f"{x} vs {y}: P({x} > {y}) = {e.value:.2f} in every resample ({every}): the {interval} collapsed to a "
                f"point, which measures no uncertainty, so no verdict from {runs[0]} vs {runs[1]} runs; run at least "
                f"{MIN_RUNS} runs each.")
    few = min(runs) < MIN_RUNS
    caveat = (f" Tentative: {runs[0]} vs {runs[1]} runs give an unreliable interval; run at least {MIN_RUNS} each."
              if few else "")
    if e.low > 0.5:
        return f"**{x}** beats {y}: P = {e.value:.2f}, and the whole {interval} is above 0.5.{caveat}"
    if e.high < 0.5:
        return f"**{y}** beats {x}: P({x} > {y}) = {e.value:.2f}, and the whole {interval} is below 0.5.{caveat}"
    return (f"{x} vs {y}: P({x} > {y}) = {e.value:.2f}, but the {interval} contains 0.5: "
            f"these runs do not show that either is better.{caveat}")


def iqm_meaning(counts: Dict[str, int]) -> str:
    """What the IQM of each experiment is with its number of runs: rliable's ``aggregate_iqm`` is a 25 %
    trimmed mean, dropping ``n // 4`` runs at each end (nothing below 4 runs)."""
    parts = []
    for name, n in counts.items():
        k = n // 4
        parts.append(f"{name}: with {n} runs nothing is trimmed: the IQM is the plain mean" if k == 0 else
                     f"{name}: the mean of the middle {n - 2 * k} of {n} runs ({k} lowest and {k} highest dropped)")
    return ("IQM (interquartile mean): rliable's 25 % trimmed mean, which drops the lowest and highest n // 4 of "
            "n runs; " + "; ".join(parts) + ".")


def _few_runs(counts: Dict[str, int]) -> Optional[str]:
    few = {name: n for name, n in counts.items() if n < MIN_RUNS}
    if not few:
        return None
    least = min(few.values())
    shown = ", ".join(f"{name}: {n} runs" for name, n in few.items())
    return (f"**Few runs** ({shown}): the bootstrap resamples only the scores these runs happened to get, so with "
            f"fewer than {MIN_RUNS} runs per experiment its intervals are unreliable, usually too narrow (with "
            f"{least} runs there are only {math.comb(2 * least - 1, least)} distinct resamples). Run at least "
            f"{MIN_RUNS} runs per experiment (e.g. `rlearn sweep CONFIG --seeds 0-{MIN_RUNS - 1}`) before relying "
            "on them.")


def _header_line(exp: Experiment) -> str:
    counts = Counter(run.status for run in exp.runs if run.status)
    status = ", ".join(f"{n} {s}" for s, n in counts.items())
    steps = describe_budget([run.envstep for run in exp.runs], exp.max_env_steps)
    facts = [f"{len(exp.runs)} runs" + (f" ({status})" if status else "")]
    facts += [str(v) for v in (exp.env_id, exp.policy) if v] + ([steps] if steps else [])
    left = f"; {len(exp.left_out)} left out (below)" if exp.left_out else ""
    return f"* **{exp.label}** (`{exp.path}`): " + ", ".join(facts) + left


def _markdown(experiments: Sequence[Experiment], sections: Sequence[ScoreSection], options: ReportOptions,
              images: Dict[str, Dict[str, str]]) -> str:
    from importlib.metadata import version

    names = [e.label for e in experiments]
    lines = [f"# Report: {' vs '.join(names)}", "",
             f"{time.strftime('%Y-%m-%d %H:%M')}. Statistics by rliable {version('rliable')}: 95 % "
             f"stratified bootstrap confidence intervals from {options.reps} resamples "
             f"({min(options.reps, options.curve_reps)} for the profiles and curves; NumPy seed {options.seed}).", ""]
    lines += [_header_line(exp) for exp in experiments]
    for exp in experiments:
        lines += [f"\nLeft out: {item}" for item in exp.left_out]
        lines += [f"\nNot read: {item}" for item in exp.problems]
    for section in sections:
        counts = {name: len(values) for name, values in section.scores.items()}
        title = "last evaluation's mean return" if section.kind == "evaluation" else f"last value of `{options.train_key}`"
        gap = f"optimality gap (target {_fmt(section.target)})" if section.target is not None else "optimality gap"
        lines += ["", f"## Final score: {title}" + (" (normalised)" if options.normalize else ""), "",
                  f"| experiment | runs | IQM | median | mean | {gap} |", "|---|---|---|---|---|---|"]
        for name, est in section.aggregates.items():
            lines.append(f"| {name} | {counts[name]} | " + " | ".join(_estimate(est[m]) for m in stats.METRICS) + " |")
        lines += ["", "Each cell: point estimate [95 % CI]. " + iqm_meaning(counts) + " Optimality gap: how far the "
                  "runs fall short of the target on average (lower is better)."]
        if any(_collapsed(e) for est in section.aggregates.values() for e in est.values()):
            lines += ["", "An interval whose two ends are equal collapsed: every resample gave the same value. It "
                      "shows that these runs agree, not how far other runs could be."]
        if few := _few_runs(counts):
            lines += ["", few]
        if section.improvement:
            lines += ["", "### Probability of improvement", "", "| X | Y | P(X > Y) | 95 % CI |", "|---|---|---|---|"]
            for (x, y), e in section.improvement.items():
                lines.append(f"| {x} | {y} | {e.value:.3f} | [{e.low:.3f}, {e.high:.3f}] |")
            lines += [""] + [f"* {verdict(x, y, e, (counts[x], counts[y]))}" for (x, y), e in section.improvement.items()]
        lines += ["", "### Scores of every run", "", "| experiment | run | status | env steps | score |", "|---|---|---|---|---|"]
        for exp in experiments:
            for run in exp.runs:
                score = run.eval_score if section.kind == "evaluation" else run.train_score
                lines.append(f"| {exp.label} | {run.name} | {run.status or '-'} | {run.envstep} | {_fmt(score)} |")
        lines += [f"\nLeft out: {item}" for item in section.left_out]
        for caption, key in (("Aggregate metrics", "aggregates"), ("Performance profiles", "profiles"),
                             ("Sample efficiency: IQM against env steps", "envstep"),
                             ("Sample efficiency: IQM against training time", "time")):
            if key in images[section.kind]:
                lines += ["", f"### {caption}", "", f"![{caption}]({images[section.kind][key]})"]
                if key == "time":
                    lines += ["", f"Time axis: {section.time_axis}. A run that ended keeps its last value up to the "
                              "end of the longest run."]
        lines += [f"\nCurves: {note}" for note in section.curve_notes]
    return "\n".join(lines) + "\n"


def _json(experiments: Sequence[Experiment], sections: Sequence[ScoreSection], options: ReportOptions) -> Dict[str, Any]:
    out: Dict[str, Any] = {"reps": options.reps, "seed": options.seed, "normalize": options.normalize,
                           "experiments": {e.label: {"path": str(e.path), "runs": [str(r.path) for r in e.runs]} for e in experiments},
                           "sections": {}}
    for s in sections:
        out["sections"][s.kind] = {
            "label": s.label, "target": s.target, "scores": s.scores,
            "aggregates": {n: {m: vars(e) for m, e in est.items()} for n, est in s.aggregates.items()},
            "probability_of_improvement": [{"x": x, "y": y, **vars(e)} for (x, y), e in s.improvement.items()],
            "curves": {axis: {n: {"x": list(c[0]), "iqm": c[1].tolist(), "low": c[2][0].tolist(), "high": c[2][1].tolist()}
                              for n, c in curves.items()} for axis, curves in s.curves.items()},
        }
    return out


def write_report(experiments: Sequence[Experiment], sections: Sequence[ScoreSection], options: ReportOptions,
                 out_dir: Path) -> Path:
    """Write ``report.md``, ``scores.json`` and the PNGs into ``out_dir``; the report's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    images: Dict[str, Dict[str, str]] = {}
    for s in sections:
        suffix = "" if s.kind == "evaluation" else "_train"
        made = images.setdefault(s.kind, {})
        made["aggregates"] = figures.plot_aggregates(s.aggregates, out_dir / f"aggregates{suffix}.png", s.label).name
        made["profiles"] = figures.plot_profiles(s.profiles, s.taus, out_dir / f"performance_profile{suffix}.png", s.label).name
        for axis, xlabel in (("envstep", "env steps"), ("time", "training time" if s.time_axis == TIME_AXIS else "wall time")):
            if s.curves.get(axis):
                notes = [n.split(": ", 1)[1] for n in s.curve_notes if n.startswith(f"{axis} curve")]
                made[axis] = figures.plot_curves(s.curves[axis], out_dir / f"sample_efficiency_{axis}{suffix}.png",
                                                 xlabel, s.label, time_axis=axis == "time", notes=notes).name
    (out_dir / "scores.json").write_text(json.dumps(_json(experiments, sections, options), indent=1) + "\n", encoding="utf-8")
    report = out_dir / "report.md"
    report.write_text(_markdown(experiments, sections, options, images), encoding="utf-8")
    return report
