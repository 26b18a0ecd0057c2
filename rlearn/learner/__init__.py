"""The learner: one ``train(data, envstep)`` call is one train iteration; checkpoints and resume.

* :class:`BaseLearner` runs iterations, records metrics in its ``TickMonitor``, calls hooks, owns the
  TensorBoard writer and saves/loads checkpoints;
* :mod:`rlearn.learner.checkpoint`: the checkpoint file format (atomic writes, safe loading, validation);
* :mod:`rlearn.learner.tb_events`: the TensorBoard writer and the event-file rewind done on resume.
"""

from rlearn.learner.checkpoint import CheckpointError
from rlearn.learner.base_learner import BaseLearner, LearnerConfigError

__all__ = ["BaseLearner", "CheckpointError", "LearnerConfigError"]
