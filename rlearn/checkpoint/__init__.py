"""Checkpoint files: the on-disk format, integrity digests, safe loading, validation, RNG state, pruning
and the choice of the checkpoint to resume from.

The learner decides *what* goes into a checkpoint (:meth:`rlearn.learner.BaseLearner.checkpoint_dict`);
this package decides how it is stored and read back, so hooks and commands that read or prune checkpoints
do not depend on the learner.
"""

from rlearn.checkpoint.files import (
    FORMAT_TAG, FORMAT_VERSION, CheckpointError, capture_rng_state, decode_state, encode_state, find_resume_checkpoint,
    iteration_checkpoints, prune_checkpoints, read_checkpoint, restore_rng_state, serialize_checkpoint,
)

__all__ = ["FORMAT_TAG", "FORMAT_VERSION", "CheckpointError", "capture_rng_state", "decode_state", "encode_state",
           "find_resume_checkpoint", "iteration_checkpoints", "prune_checkpoints", "read_checkpoint",
           "restore_rng_state", "serialize_checkpoint"]
