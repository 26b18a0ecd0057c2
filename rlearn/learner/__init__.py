"""The learner: one ``train(data, envstep)`` call is one train iteration.

:class:`BaseLearner` runs iterations, records metrics in its ``TickMonitor``, calls hooks and decides what a
checkpoint holds; the file format lives in :mod:`rlearn.checkpoint`, output formats in :mod:`rlearn.writers`.
"""

from rlearn.learner.base_learner import BaseLearner, LearnerConfigError

__all__ = ["BaseLearner", "LearnerConfigError"]
