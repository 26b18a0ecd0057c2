"""Reinforcement-learning parts shared by the policies (no networks, no state): advantages, action heads and
spaces, acting from numpy, step statistics (:class:`StepMeans`), and the checks of a replay minibatch or an
on-policy rollout.
"""

from rlearn.rl.acting import (ActionSpec, BoxActions, action_spec, box_observation_shape, forward_numpy, host_columns,
                              obs_tensor, sample_categorical)
from rlearn.rl.advantages import compute_gae, explained_variance
from rlearn.rl.means import StepMeans
from rlearn.rl.replay_batch import BATCH_KEYS, ROLLOUT_KEYS, check_replay_batch, check_rollout, host_values

__all__ = [
    "ActionSpec", "action_spec", "sample_categorical", "ROLLOUT_KEYS", "check_rollout", "compute_gae",
    "explained_variance", "BATCH_KEYS", "check_replay_batch", "host_values", "BoxActions", "box_observation_shape",
    "forward_numpy", "host_columns", "obs_tensor", "StepMeans",
]
