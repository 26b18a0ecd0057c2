"""Reinforcement-learning maths shared by the policies (no networks, no state).

* :mod:`rlearn.rl.advantages`: GAE(lambda) advantages and value targets for on-policy rollouts
  (:func:`compute_gae`), and the value-fit diagnostic :func:`explained_variance`. Used by PPO and PPG.
* :mod:`rlearn.rl.rollout`: :func:`check_rollout`, the checks and conversion of an on-policy rollout
  before ``_forward_learn`` uses it.
"""

from rlearn.rl.advantages import compute_gae, explained_variance
from rlearn.rl.rollout import ROLLOUT_KEYS, check_rollout

__all__ = ["ROLLOUT_KEYS", "check_rollout", "compute_gae", "explained_variance"]
