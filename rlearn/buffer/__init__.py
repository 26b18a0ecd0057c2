"""Where collected experience waits for the learner: off-policy policies sample a :class:`ReplayBuffer`,
on-policy ones learn from one fresh ``[T, N, ...]`` rollout per iteration (:func:`rollout_to_tensors`)."""

from rlearn.buffer.replay import FIELDS, ReplayBatch, ReplayBuffer, action_dtype_for
from rlearn.buffer.rollout import ROLLOUT_KEYS, flatten_rollout, rollout_to_tensors

__all__ = [
    "FIELDS", "ROLLOUT_KEYS", "ReplayBatch", "ReplayBuffer", "action_dtype_for", "flatten_rollout", "rollout_to_tensors"
]
