"""The one exception of the checkpoint package."""

__all__ = ["CheckpointError"]


class CheckpointError(RuntimeError):
    """A checkpoint cannot be written or read; the message names the file (or state entry) and the problem."""
