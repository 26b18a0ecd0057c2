"""Experiments: many runs of ``rlearn train``, each its own process and work dir.

* :mod:`~rlearn.experiments.sweep`: one config over many seeds (``rlearn sweep``), resumable;
* :mod:`~rlearn.experiments.scores`: the final scores and learning curves of the runs of experiment dirs;
* :mod:`~rlearn.experiments.report`: aggregate statistics with confidence intervals (rliable) as a Markdown
  report with PNGs (``rlearn report``);
* :mod:`~rlearn.experiments.tune`: an Optuna study whose trials are ordinary runs (``rlearn tune``);
* :mod:`~rlearn.experiments.child`: starting, following and stopping one ``rlearn train`` process.

See docs/experiments.md.
"""

from rlearn.experiments.child import ExperimentError

__all__ = ["ExperimentError"]
