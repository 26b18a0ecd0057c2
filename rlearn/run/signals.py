"""Signals during a run: Ctrl-C stops at a safe point, the launcher's SIGTERM ends a rank with a reason,
and environment worker processes ignore Ctrl-C (the main process closes them).

This module is the place for every signal policy of a run (e.g. SIGTERM saving a checkpoint like Ctrl-C).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

from rlearn import distributed as dist

__all__ = ["InterruptGuard", "TerminatedByLauncher", "workers_ignore_sigint"]


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class InterruptGuard:
    """Turns the first SIGINT into a flag (:attr:`requested`) checked at safe points; the second raises
    KeyboardInterrupt.

    Only installed in the main thread (signal handlers cannot be set elsewhere), and not at all with
    ``enabled=False`` (multi-process runs: the ranks could not agree on where to stop without a collective
    per iteration, so Ctrl-C stops every rank at once, as the default SIGINT handler does). The previous
    handler is given back on exit.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.requested = False
        self.enabled = enabled
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> "InterruptGuard":
        if self.enabled and _in_main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False


class TerminatedByLauncher:
    """In a multi-process run (``enabled``), turns SIGTERM (what torchrun sends every rank when one of them
    failed) into a :class:`rlearn.distributed.DistributedError`, so the rank closes its files and its log
    says why it stopped."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._previous: Any = None

    def __enter__(self) -> "TerminatedByLauncher":
        if self.enabled and _in_main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    @staticmethod
    def _handle(signum: int, frame: Any) -> None:
        raise dist.DistributedError(
            f"rank {dist.get_rank()}: terminated by SIGTERM from the launcher, usually because another rank "
            "failed (its traceback and log file say why)"
        )

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


@contextlib.contextmanager
def workers_ignore_sigint(asynchronous: bool) -> Iterator[None]:
    """Ignore SIGINT while environment worker processes start, so that they inherit "ignore".

    Ctrl-C in a terminal reaches every process of the foreground group: without this, each worker would
    die with KeyboardInterrupt in the middle of a step, and the run could not stop cleanly. The main
    process handles Ctrl-C and closes the workers itself.
    """
    if not asynchronous or not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
