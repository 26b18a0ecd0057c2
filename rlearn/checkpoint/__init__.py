"""Checkpoint files: format, integrity, safe loading, validation, RNG state, pruning and the file to resume from.
The learner decides what goes into a checkpoint; this package how it is stored and read back."""

from rlearn.checkpoint.files import (
    FORMAT_TAG, FORMAT_VERSION, CheckpointError, capture_rng_state, decode_state, encode_state, find_resume_checkpoint,
    iteration_checkpoints, prune_checkpoints, read_checkpoint, restore_rng_state, serialize_checkpoint,
)

__all__ = ["FORMAT_TAG", "FORMAT_VERSION", "CheckpointError", "capture_rng_state", "decode_state", "encode_state",
           "find_resume_checkpoint", "iteration_checkpoints", "prune_checkpoints", "read_checkpoint",
           "restore_rng_state", "serialize_checkpoint"]
