"""Experiments: many runs of ``rlearn train``, each its own process and work dir: seed sweeps
(:mod:`~rlearn.experiments.sweep`), Optuna studies (:mod:`~rlearn.experiments.tune`) and reports with
confidence intervals over their runs (:mod:`~rlearn.experiments.report`). See docs/experiments.md.
"""

from rlearn.experiments.child import ExperimentError

__all__ = ["ExperimentError"]
