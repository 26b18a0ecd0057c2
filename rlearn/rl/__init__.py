"""Reinforcement-learning maths shared by the policies (no networks, no state).

* :mod:`rlearn.rl.advantages`: GAE(lambda) advantages and value targets for on-policy rollouts
  (:func:`compute_gae`), and the value-fit diagnostic :func:`explained_variance`. Used by PPO and PPG.
* :mod:`rlearn.rl.policy_io`: :func:`action_spec` (the spaces an actor-critic accepts and its action head)
  and :func:`sample_categorical` (inverse-CDF sampling from logits with the policy's own generator).
* :mod:`rlearn.rl.rollout`: :func:`check_rollout`, the checks and conversion of an on-policy rollout
  before ``_forward_learn`` uses it.
"""

from rlearn.rl.advantages import compute_gae, explained_variance
from rlearn.rl.policy_io import ActionSpec, action_spec, sample_categorical
from rlearn.rl.rollout import ROLLOUT_KEYS, check_rollout

__all__ = ["ActionSpec", "action_spec", "sample_categorical", "ROLLOUT_KEYS", "check_rollout", "compute_gae", "explained_variance"]
