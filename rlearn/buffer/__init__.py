"""Where collected experience waits for the learner.

* :class:`ReplayBuffer`: off-policy policies sample uniform batches of float32 tensors from it
  (discrete actions as int64); :func:`action_dtype_for` picks the action storage dtype of a space.
* :func:`rollout_to_tensors`: on-policy policies learn from one fresh ``[T, N, ...]`` rollout per iteration.
"""

from rlearn.buffer.replay import FIELDS, ReplayBuffer, action_dtype_for
from rlearn.buffer.rollout import ROLLOUT_KEYS, flatten_rollout, rollout_to_tensors

__all__ = ["FIELDS", "ROLLOUT_KEYS", "ReplayBuffer", "action_dtype_for", "flatten_rollout", "rollout_to_tensors"]
