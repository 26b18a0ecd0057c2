"""``CheckpointHook``: periodic and final checkpoints in ``<work_dir>/ckpt`` (see docs/checkpoints.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rlearn.checkpoint import prune_checkpoints
from rlearn.hooks.base import Hook, Priority
from rlearn.registry import HOOKS
from rlearn.trace import span
from rlearn.values import check_int

__all__ = ["CheckpointHook"]


@HOOKS.register
class CheckpointHook(Hook):
    """On rank 0, every ``freq`` iterations (None: none) and, with ``save_last``, when the run ends: save
    ``<work_dir>/<dirname>/iteration_<n>.pt`` and ``latest.pt`` (the same bytes, each written atomically), then
    keep the newest ``keep`` ``iteration_*.pt`` (None: all). Default priority ``LOW``: after ``LogShowHook``, so
    a checkpoint includes its own log."""

    DEFAULT_PRIORITY = Priority.LOW

    def __init__(self, freq: Optional[int] = None, keep: Optional[int] = None, save_last: bool = True,
                 dirname: str = "ckpt") -> None:
        self.freq = check_int("CheckpointHook freq", freq, optional=True)
        self.keep = check_int("CheckpointHook keep", keep, optional=True)
        self.save_last = bool(save_last)
        if not isinstance(dirname, str) or not dirname:
            raise ValueError(f"CheckpointHook dirname must be a non-empty str, got {dirname!r}")
        self.dirname = dirname
        self.last_saved_iter: Optional[int] = None
        #: train_iter of the checkpoint a resumed run loaded, until its first save (which prunes the
        #: abandoned timeline: checkpoints numbered above it, written by the run that was resumed)
        self.resumed_from_iter: Optional[int] = None

    def after_load_checkpoint(self, learner: Any, checkpoint: Any) -> None:
        self.resumed_from_iter = learner.train_iter

    def after_iter(self, learner: Any) -> None:
        if self.freq is not None and learner.train_iter % self.freq == 0:  # freq: a checked positive int
            self.save(learner)

    def after_run(self, learner: Any) -> None:
        if self.save_last and self.last_saved_iter != learner.train_iter:
            self.save(learner)

    def save(self, learner: Any) -> Optional[Path]:
        """Save ``iteration_<train_iter>.pt`` and ``latest.pt`` now; returns the path (None on ranks > 0)."""
        if learner.rank != 0:
            return None
        if learner.work_dir is None:
            raise ValueError("CheckpointHook needs a learner with a work_dir")
        directory = Path(learner.work_dir) / self.dirname
        with span("checkpoint/save", lane="checkpoint"):
            path = learner.save_checkpoint(directory / f"iteration_{learner.train_iter}.pt",
                                           copies=[directory / "latest.pt"])
            self.last_saved_iter = learner.train_iter
            removed = prune_checkpoints(directory, self.keep, protect=[path], resumed_from_iter=self.resumed_from_iter)
            self.resumed_from_iter = None  # the resumed timeline's own checkpoints are kept from now on
        learner.logger.info(
            "checkpoint saved: %s%s", path, f" (removed {', '.join(p.name for p in removed)})" if removed else "")
        return path
