"""Aggregate statistics of experiments with rliable (Agarwal et al., 2021), each with a 95 % stratified
bootstrap confidence interval.

Scores are ``(runs x tasks)`` matrices, one per experiment. rliable draws from NumPy's global generator; each
function seeds it with ``seed`` first, so a report equals calling rliable directly after
``np.random.seed(seed)``. The median is ``np.median`` over runs: rliable's ``aggregate_median`` is a median of
per-task means, which with one task is the mean.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from rlearn.experiments.child import ExperimentError

__all__ = ["METRICS", "Estimate", "require_rliable", "aggregate_function", "aggregate_estimates",
           "improvement_probabilities", "performance_profiles", "iqm_curves", "iqm_per_point"]

#: the aggregate metrics, in the order of :func:`aggregate_function`'s output
METRICS = ("IQM", "median", "mean", "optimality gap")


@dataclass
class Estimate:
    """A point estimate with its confidence interval ``[low, high]``."""

    value: float
    low: float
    high: float


def require_rliable() -> Tuple[Any, Any]:
    """``(rliable.library, rliable.metrics)``; ExperimentError with the install line when missing."""
    try:
        from rliable import library, metrics
    except ImportError as exc:
        from rlearn.executables import shell_command

        hint = shell_command("pip", "install", "-c", "constraints.txt", "-e", ".[experiments]")
        raise ExperimentError(f"rlearn report needs the rliable package ({exc}); install it with: {hint} (in rlearn's "
                              "source directory)") from exc
    return library, metrics


def aggregate_function(target: Optional[float]) -> Any:
    """``scores -> [IQM, median, mean, optimality gap]`` (the gap is NaN without a ``target``)."""
    _, metrics = require_rliable()

    def aggregate(scores: np.ndarray) -> np.ndarray:
        gap = metrics.aggregate_optimality_gap(scores, target) if target is not None else np.nan
        return np.array([metrics.aggregate_iqm(scores), np.median(scores), metrics.aggregate_mean(scores), gap])

    return aggregate


def _split(points: np.ndarray, intervals: np.ndarray) -> List[Estimate]:
    return [Estimate(float(p), float(lo), float(hi)) for p, lo, hi in zip(np.atleast_1d(points), intervals[0], intervals[1])]


def aggregate_estimates(scores: Mapping[str, np.ndarray], target: Optional[float], reps: int,
                        seed: int = 0) -> Dict[str, Dict[str, Estimate]]:
    """``{experiment: {metric: Estimate}}`` for :data:`METRICS`."""
    library, _ = require_rliable()
    np.random.seed(seed)
    points, intervals = library.get_interval_estimates(dict(scores), aggregate_function(target), reps=reps)
    return {name: dict(zip(METRICS, _split(points[name], intervals[name]))) for name in scores}


def improvement_probabilities(scores: Mapping[str, np.ndarray], reps: int, seed: int = 0) -> Dict[Tuple[str, str], Estimate]:
    """``{(x, y): P(X > Y)}`` for each pair of experiments in order (x before y), with its CI."""
    library, metrics = require_rliable()
    pairs = list(itertools.combinations(scores, 2))
    if not pairs:
        return {}
    data = {f"{x} > {y}": (scores[x], scores[y]) for x, y in pairs}
    np.random.seed(seed)
    points, intervals = library.get_interval_estimates(data, metrics.probability_of_improvement, reps=reps)
    return {(x, y): _split(points[f"{x} > {y}"], intervals[f"{x} > {y}"])[0] for x, y in pairs}


def performance_profiles(scores: Mapping[str, np.ndarray], taus: Sequence[float], reps: int,
                         seed: int = 0) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    """``{experiment: (fraction of runs with a score > tau for each tau, its 2 x len(taus) CI)}``."""
    library, _ = require_rliable()
    np.random.seed(seed)
    profiles, cis = library.create_performance_profile(dict(scores), np.asarray(taus), reps=reps)
    return {name: (np.asarray(profiles[name]), np.asarray(cis[name])) for name in scores}


def iqm_per_point(curves: np.ndarray) -> np.ndarray:
    """The IQM over runs and tasks at each point of ``(runs x tasks x points)`` curves: rliable's
    ``aggregate_iqm`` (a 25 % trimmed mean of all scores) of each point's ``(runs x tasks)`` slice."""
    import scipy.stats

    return scipy.stats.trim_mean(curves.reshape(-1, curves.shape[-1]), proportiontocut=0.25, axis=0)


def iqm_curves(curves: Mapping[str, np.ndarray], reps: int, seed: int = 0) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    """``{experiment: (IQM at each point, its 2 x points CI)}`` of ``(runs x tasks x points)`` curves."""
    library, _ = require_rliable()
    if not curves:
        return {}
    np.random.seed(seed)
    points, intervals = library.get_interval_estimates(dict(curves), iqm_per_point, reps=reps)
    return {name: (np.asarray(points[name]), np.asarray(intervals[name])) for name in curves}
