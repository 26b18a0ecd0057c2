"""Signals during a run: every signal policy of a run lives here.

* One process: Ctrl-C (SIGINT), SIGTERM (``docker stop``, a scheduler's preemption) and SIGHUP (the terminal
  or SSH session closed) stop the run at the next safe point, which then saves a checkpoint
  (:class:`InterruptGuard`); a second signal stops at once.
* Several processes: SIGTERM (or SIGHUP, which torchrun passes on), which torchrun sends every rank when
  another one failed, ends the rank with a reason in its log (:class:`TerminatedByLauncher`); a rank whose
  launcher died (SIGKILL of ``torchrun`` or of ``rlearn --nproc``) is told so by the kernel
  (:func:`~rlearn.distributed.launch.stop_with_parent`, which the launcher uses for torchrun
  too) and stops the same way.
* Environment worker processes ignore SIGINT, SIGTERM and SIGHUP (the main process closes them).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any, Iterator, Optional

from rlearn import distributed as dist
from rlearn.distributed.launch import stop_with_parent

__all__ = ["InterruptGuard", "StopNow", "TerminatedByLauncher", "stop_with_parent", "workers_ignore_sigint", "signal_exit_code"]


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def signal_exit_code(signum: int) -> int:
    """The shell's exit status of a process stopped by ``signum``: ``128 + signum`` (130 for SIGINT, 143 for
    SIGTERM)."""
    return 128 + int(signum)


class StopNow(KeyboardInterrupt):
    """A second SIGINT/SIGTERM/SIGHUP during a one-process run: stop at once, without a checkpoint.

    Attributes:
        signum: the signal received (the exit status is ``128 + signum``).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"second {signal.Signals(signum).name}: stopped at once, without a checkpoint")
        self.signum = int(signum)


#: the signals that stop a one-process run at a safe point (SIGHUP: the terminal or SSH session went away)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class InterruptGuard:
    """Turns the first SIGINT, SIGTERM or SIGHUP into a flag (:attr:`requested`, :attr:`signal_name`) checked at
    safe points; a second one of any of them raises KeyboardInterrupt (stop at once, no checkpoint).

    Only installed in the main thread (signal handlers cannot be set elsewhere), and not at all with
    ``enabled=False`` (multi-process runs: the ranks could not agree on where to stop without a collective
    per iteration, so Ctrl-C stops every rank at once, as the default SIGINT handler does, and SIGTERM is
    :class:`TerminatedByLauncher`'s). The previous handlers are given back on exit.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.requested = False
        self.enabled = enabled
        #: ``"SIGINT"``, ``"SIGTERM"`` or ``"SIGHUP"``: the first signal received (None before)
        self.signal_name: Optional[str] = None
        self.signum: Optional[int] = None
        self._previous: dict = {}

    def __enter__(self) -> "InterruptGuard":
        if self.enabled and _in_main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise StopNow(signum)
        self.requested = True
        self.signum = signum
        self.signal_name = signal.Signals(signum).name

    @property
    def reason(self) -> str:
        """How the user asked to stop, for log lines: ``"Ctrl-C"``, ``"SIGTERM"`` or ``"SIGHUP"``."""
        return "Ctrl-C" if self.signum in (None, signal.SIGINT) else str(self.signal_name)

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


class TerminatedByLauncher:
    """In a multi-process run (``enabled``), turns SIGTERM (and SIGHUP) into a
    :class:`rlearn.distributed.DistributedError`, so the rank closes its files and its log says why it stopped.

    torchrun sends SIGTERM to every rank when one of them failed, and also when torchrun itself is told to
    stop (it passes its own SIGTERM/SIGINT on); a rank cannot tell the two apart, and the ranks could not agree
    on a common iteration to checkpoint without communicating every iteration, so a rank stops at once in
    both cases (see docs/distributed.md, "Failures"). When the launcher is gone (:func:`stop_with_parent`
    makes the kernel send SIGTERM when it dies) the message says so.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._previous: dict = {}
        self._parent = os.getppid()

    #: the signals turned into a DistributedError (torchrun passes its own SIGTERM, SIGHUP... on to the ranks)
    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> "TerminatedByLauncher":
        if self.enabled and _in_main_thread():
            self._parent = os.getppid()
            self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    #: how long a SIGTERM waits to see whether the launcher is dying (its threads exit one by one, and the
    #: kernel's parent-death signal can come before this process is handed to a new parent)
    PARENT_GRACE_S = 1.0

    def _parent_gone(self) -> bool:
        deadline = time.monotonic() + self.PARENT_GRACE_S
        while True:
            if os.getppid() != self._parent:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def _handle(self, signum: int, frame: Any) -> None:
        if self._parent_gone():
            raise dist.DistributedError(
                f"rank {dist.get_rank()}: the launcher (pid {self._parent}: torchrun or rlearn --nproc) is gone, "
                "stopping; nothing supervises this rank any more (continue from the last checkpoint with --resume)"
            )
        raise dist.DistributedError(
            f"rank {dist.get_rank()}: terminated by {signal.Signals(signum).name} from the launcher, usually because "
            "another rank failed (its traceback and log file say why)"
        )

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


@contextlib.contextmanager
def workers_ignore_sigint(asynchronous: bool) -> Iterator[None]:
    """Ignore SIGINT, SIGTERM and SIGHUP while environment worker processes start, so that they inherit "ignore".

    Ctrl-C in a terminal reaches every process of the foreground group, and a scheduler's SIGTERM often
    reaches every process of the job: without this, each worker would die in the middle of a step, and the
    run could not stop cleanly. The main process handles both and closes the workers itself.
    """
    if not asynchronous or not _in_main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
