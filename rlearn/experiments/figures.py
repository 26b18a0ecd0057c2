"""The PNGs of ``rlearn report``, drawn with matplotlib (no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

from rlearn.experiments.stats import METRICS, Estimate

__all__ = ["plot_aggregates", "plot_profiles", "plot_curves"]


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _save(fig, out: Path, legend_ax=None) -> Path:
    if legend_ax is not None:
        legend_ax.grid(True, alpha=0.3)
        legend_ax.legend(loc="best", fontsize="small")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def _colors(names: Sequence[str]) -> Dict[str, str]:
    return {name: f"C{i % 10}" for i, name in enumerate(names)}  # matplotlib's default colour cycle


def plot_aggregates(estimates: Mapping[str, Mapping[str, Estimate]], out: Path, score_label: str) -> Path:
    """One panel per metric: each experiment's point estimate and its CI as a horizontal bar."""
    names = list(estimates)
    shown = [m for m in METRICS if any(np.isfinite(estimates[n][m].value) for n in names)]
    colors = _colors(names)
    fig = _figure(3.0 * len(shown), 0.6 * len(names) + 1.4)
    axes = fig.subplots(1, len(shown), squeeze=False)[0]
    for ax, metric in zip(axes, shown):
        for row, name in enumerate(names):
            e = estimates[name][metric]
            ax.barh(row, e.high - e.low, left=e.low, height=0.6, color=colors[name], alpha=0.75)
            ax.plot([e.value, e.value], [row - 0.3, row + 0.3], color="black", linewidth=1.5)
        ax.set_yticks(range(len(names)), names if ax is axes[0] else [""] * len(names))
        ax.set_title(metric)
        ax.grid(True, axis="x", alpha=0.3)
    fig.supxlabel(score_label)
    return _save(fig, out)


def plot_profiles(profiles: Mapping[str, Tuple[np.ndarray, np.ndarray]], taus: Sequence[float], out: Path,
                  score_label: str) -> Path:
    """The fraction of runs scoring above each threshold, with its CI band."""
    fig = _figure(6.5, 4.0)
    ax = fig.add_subplot()
    colors = _colors(list(profiles))
    for name, (profile, ci) in profiles.items():
        ax.plot(taus, profile, color=colors[name], label=name, linewidth=1.8)
        ax.fill_between(taus, ci[0], ci[1], color=colors[name], alpha=0.2, linewidth=0)
    ax.set_xlabel(f"{score_label} threshold τ")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    return _save(fig, out, ax)


def plot_curves(curves: Mapping[str, Tuple[List[float], np.ndarray, np.ndarray]], out: Path, xlabel: str,
                ylabel: str, time_axis: bool = False, notes: Sequence[str] = ()) -> Path:
    """IQM curves with their CI bands: ``{experiment: (xs, iqm, 2 x len(xs) CI)}``; ``notes`` (what a curve
    leaves out) are written below the axes."""
    fig = _figure(6.5, 4.0)
    ax = fig.add_subplot()
    colors = _colors(list(curves))
    scale, unit = 1.0, ""
    if time_axis:
        longest = max((xs[-1] for xs, _, _ in curves.values() if xs), default=0.0)
        scale, unit = (60.0, " (min)") if longest >= 120 else (1.0, " (s)")
    for name, (xs, iqm, ci) in curves.items():
        x = np.asarray(xs) / scale
        ax.plot(x, iqm, color=colors[name], label=name, linewidth=1.8, marker="." if len(xs) < 30 else None)
        ax.fill_between(x, ci[0], ci[1], color=colors[name], alpha=0.2, linewidth=0)
    ax.set_xlabel(xlabel + unit)
    ax.set_ylabel(f"IQM of {ylabel}")
    if notes:  # below the axis label, in the space constrained layout keeps for it
        import textwrap

        fig.supxlabel("\n".join(textwrap.fill(n, 110) for n in notes), fontsize="x-small", ha="left", x=0.01)
    return _save(fig, out, ax)
