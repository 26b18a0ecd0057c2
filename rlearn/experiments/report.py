"""``rlearn report``: which experiment is better, and how sure we are, as Markdown with PNGs.

For each score (:mod:`scores`) over the runs of each experiment dir: IQM, median, mean and optimality gap
with 95 % CIs, the probability of improvement of each pair, performance profiles and IQM learning curves
against env steps and wall time (:mod:`stats`). Written to ``OUT/report.md``, ``OUT/scores.json`` and
``OUT/*.png``. Scores can be normalised (``normalize=(low, high)``); the optimality gap is measured against
``target`` (default: 1 for normalised scores, else the environment's ``reward_threshold``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlearn.experiments import figures, stats
from rlearn.experiments.child import ExperimentError
from rlearn.experiments.scores import Experiment, align, load_experiment, time_grid

__all__ = ["ReportOptions", "ScoreSection", "build_report", "write_report"]


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


def _default_target(experiments: Sequence[Experiment]) -> Optional[float]:
    """The environments' common ``reward_threshold`` (gymnasium's registry), or None."""
    import gymnasium

    thresholds = set()
    for exp in experiments:
        try:
            thresholds.add(gymnasium.spec(exp.env_id).reward_threshold if exp.env_id else None)
        except Exception:  # noqa: BLE001 - an unregistered env has no threshold
            thresholds.add(None)
    return thresholds.pop() if len(thresholds) == 1 else None


def _section(kind: str, experiments: Sequence[Experiment], options: ReportOptions) -> Optional[ScoreSection]:
    """The statistics of one kind of score; None when no run has that score."""
    low, span = (options.normalize[0], options.normalize[1] - options.normalize[0]) if options.normalize else (0.0, 1.0)
    norm = (lambda v: (v - low) / span)
    scores: Dict[str, List[float]] = {}
    by_step: Dict[str, List[Tuple[List[float], List[float]]]] = {}
    by_time: Dict[str, List[Tuple[List[float], List[float]]]] = {}
    left_out: List[str] = []
    for exp in experiments:
        values, steps, times = [], [], []
        for run in exp.runs:
            score = run.eval_score if kind == "evaluation" else run.train_score
            step_curve = run.eval_by_step if kind == "evaluation" else run.train_by_step
            time_curve = run.eval_by_time if kind == "evaluation" else run.train_by_time
            if score is None:
                left_out.append(f"{run.path}: no {kind} score")
                continue
            values.append(norm(score))
            steps.append((step_curve[0], [norm(v) for v in step_curve[1]]))
            times.append((time_curve[0], [norm(v) for v in time_curve[1]]))
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
    for axis, data in (("envstep", by_step), ("time", by_time)):
        grids, arrays = {}, {}
        for name, runs in data.items():
            grid, values = align(runs, time_grid(runs) if axis == "time" else None)
            if grid:
                grids[name] = grid
                arrays[name] = np.asarray(values, dtype=np.float64)[:, None, :]  # runs x 1 task x points
        estimates = stats.iqm_curves(arrays, min(options.reps, options.curve_reps), options.seed)
        section.curves[axis] = {name: (grids[name], *estimates[name]) for name in estimates}
    return section


def build_report(exp_dirs: Sequence[Path], options: ReportOptions) -> Tuple[List[Experiment], List[ScoreSection]]:
    """Load the experiments and compute every section (ExperimentError for an unusable dir)."""
    stats.require_rliable()
    if options.reps < 10:
        raise ExperimentError(f"--reps must be >= 10, got {options.reps}")
    if options.normalize and options.normalize[1] <= options.normalize[0]:
        raise ExperimentError(f"--normalize LOW:HIGH needs LOW < HIGH, got {options.normalize}")
    experiments = []
    for path in exp_dirs:
        path = Path(path)
        taken = {e.label for e in experiments}
        label = path.name if path.name not in taken else str(path)
        experiments.append(load_experiment(path, options.train_key, label))
    kinds = ("evaluation", "training") if options.train_key else ("evaluation",)
    sections = [s for s in (_section(k, experiments, options) for k in kinds) if s is not None]
    if not sections:
        raise ExperimentError("no run has an evaluation (evaluations.jsonl) or a training score to report")
    return experiments, sections


# ------------------------------------------------------------------------------------------- writing
def _fmt(value: float) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{value:.4g}"


def _estimate(e: stats.Estimate) -> str:
    return "-" if not np.isfinite(e.value) else f"{_fmt(e.value)} [{_fmt(e.low)}, {_fmt(e.high)}]"


def verdict(x: str, y: str, e: stats.Estimate) -> str:
    """One sentence on ``P(X > Y)``: which is better, and whether the CI excludes a coin flip (0.5)."""
    if e.low > 0.5:
        return f"**{x}** beats {y}: P = {e.value:.2f}, and the whole 95 % CI [{e.low:.2f}, {e.high:.2f}] is above 0.5."
    if e.high < 0.5:
        return f"**{y}** beats {x}: P({x} > {y}) = {e.value:.2f}, and the whole 95 % CI [{e.low:.2f}, {e.high:.2f}] is below 0.5."
    return (f"{x} vs {y}: P({x} > {y}) = {e.value:.2f}, but the 95 % CI [{e.low:.2f}, {e.high:.2f}] contains 0.5: "
            "these runs do not show that either is better.")


def _markdown(experiments: Sequence[Experiment], sections: Sequence[ScoreSection], options: ReportOptions,
              images: Dict[str, Dict[str, str]]) -> str:
    from importlib.metadata import version

    names = [e.label for e in experiments]
    lines = [f"# Report: {' vs '.join(names)}", "",
             f"{time.strftime('%Y-%m-%d %H:%M')}. Statistics by rliable {version('rliable')}: 95 % "
             f"stratified bootstrap confidence intervals from {options.reps} resamples "
             f"({min(options.reps, options.curve_reps)} for the profiles and curves; NumPy seed {options.seed}).", ""]
    for exp in experiments:
        counts = Counter(run.status for run in exp.runs if run.status)
        status = ", ".join(f"{n} {s}" for s, n in counts.items())
        lines.append(f"* **{exp.label}** (`{exp.path}`): {len(exp.runs)} runs" + (f" ({status})" if status else "")
                     + (f", {exp.env_id}" if exp.env_id else "") + (f", {exp.max_env_steps} env steps per run" if exp.max_env_steps else ""))
    for section in sections:
        title = "last evaluation's mean return" if section.kind == "evaluation" else f"last value of `{options.train_key}`"
        gap = f"optimality gap (target {_fmt(section.target)})" if section.target is not None else "optimality gap"
        lines += ["", f"## Final score: {title}" + (" (normalised)" if options.normalize else ""), "",
                  f"| experiment | runs | IQM | median | mean | {gap} |", "|---|---|---|---|---|---|"]
        for name, est in section.aggregates.items():
            lines.append(f"| {name} | {len(section.scores[name])} | " + " | ".join(_estimate(est[m]) for m in stats.METRICS) + " |")
        lines += ["", "Each cell: point estimate [95 % CI]. IQM: mean of the middle 50 % of runs; optimality gap: "
                  "how far the runs fall short of the target on average (lower is better)."]
        if section.improvement:
            lines += ["", "### Probability of improvement", "", "| X | Y | P(X > Y) | 95 % CI |", "|---|---|---|---|"]
            for (x, y), e in section.improvement.items():
                lines.append(f"| {x} | {y} | {e.value:.3f} | [{e.low:.3f}, {e.high:.3f}] |")
            lines += [""] + [f"* {verdict(x, y, e)}" for (x, y), e in section.improvement.items()]
        lines += ["", "### Scores of every run", "", "| experiment | run | status | env steps | score |", "|---|---|---|---|---|"]
        for exp in experiments:
            for run in exp.runs:
                score = run.eval_score if section.kind == "evaluation" else run.train_score
                lines.append(f"| {exp.label} | {run.name} | {run.status or '-'} | {run.envstep} | {_fmt(score)} |")
        for item in section.left_out:
            lines.append(f"\nLeft out: {item}")
        for caption, key in (("Aggregate metrics", "aggregates"), ("Performance profiles", "profiles"),
                             ("Sample efficiency: IQM against env steps", "envstep"),
                             ("Sample efficiency: IQM against wall time", "time")):
            if key in images[section.kind]:
                lines += ["", f"### {caption}", "", f"![{caption}]({images[section.kind][key]})"]
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
        for axis, xlabel in (("envstep", "env steps"), ("time", "wall time")):
            if s.curves.get(axis):
                made[axis] = figures.plot_curves(s.curves[axis], out_dir / f"sample_efficiency_{axis}{suffix}.png",
                                                 xlabel, s.label, time_axis=axis == "time").name
    (out_dir / "scores.json").write_text(json.dumps(_json(experiments, sections, options), indent=1) + "\n", encoding="utf-8")
    report = out_dir / "report.md"
    report.write_text(_markdown(experiments, sections, options, images), encoding="utf-8")
    return report
