"""Reinforcement-learning parts shared by the policies (no networks, no state).

* :mod:`rlearn.rl.advantages`: GAE(lambda) advantages and value targets for on-policy rollouts
  (:func:`compute_gae`), and the value-fit diagnostic :func:`explained_variance`. Used by PPO and PPG.
* :mod:`rlearn.rl.policy_io`: :func:`action_spec` (the spaces an actor-critic accepts and its action head)
  and :func:`sample_categorical` (inverse-CDF sampling from logits with the policy's own generator).
* :mod:`rlearn.rl.rollout`: :func:`check_rollout`, the checks and conversion of an on-policy rollout
  before ``_forward_learn`` uses it.
* :mod:`rlearn.rl.replay_batch`: :func:`check_replay_batch`, the same for a replay minibatch (TD3, SAC, DQN).
* :mod:`rlearn.rl.acting`: :func:`obs_tensor` and :func:`forward_numpy` (acting from numpy observations) and
  :class:`BoxActions` (a ``Box`` action space in normalised units ``[-1, 1]``).
"""

from rlearn.rl.acting import BoxActions, box_observation_shape, forward_numpy, obs_tensor
from rlearn.rl.advantages import compute_gae, explained_variance
from rlearn.rl.policy_io import ActionSpec, action_spec, sample_categorical
from rlearn.rl.replay_batch import BATCH_KEYS, check_replay_batch, host_values
from rlearn.rl.rollout import ROLLOUT_KEYS, check_rollout

__all__ = [
    "ActionSpec", "action_spec", "sample_categorical", "ROLLOUT_KEYS", "check_rollout", "compute_gae",
    "explained_variance", "BATCH_KEYS", "check_replay_batch", "host_values", "BoxActions", "box_observation_shape",
    "forward_numpy", "obs_tensor",
]
