"""Reinforcement-learning maths shared by the policies (no networks, no state).

* :mod:`rlearn.rl.advantages`: GAE(lambda) advantages and value targets for on-policy rollouts
  (:func:`compute_gae`), and the value-fit diagnostic :func:`explained_variance`. Used by PPO and PPG.
"""

from rlearn.rl.advantages import compute_gae, explained_variance

__all__ = ["compute_gae", "explained_variance"]
