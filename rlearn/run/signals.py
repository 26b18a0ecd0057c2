"""Signals during a run. One process: SIGINT, SIGTERM and SIGHUP stop at the next safe point with a checkpoint
(:class:`InterruptGuard`), a second one at once. Several: SIGTERM or SIGHUP from the launcher ends the rank with a
reason in its log (:class:`TerminatedByLauncher`). Environment workers ignore all three."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Dict, Optional, Tuple

from rlearn import distributed as dist
from rlearn.distributed.launch import stop_with_parent

__all__ = ["InterruptGuard", "StopNow", "TerminatedByLauncher", "stop_with_parent", "workers_ignore_sigint", "signal_exit_code"]

#: the signals that stop a one-process run at a safe point (SIGHUP: the terminal or SSH session went away)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_exit_code(signum: int) -> int:
    """The shell's exit status of a process stopped by ``signum``: ``128 + signum`` (130 for SIGINT)."""
    return 128 + int(signum)


class StopNow(KeyboardInterrupt):
    """A second SIGINT/SIGTERM/SIGHUP (``signum``) during a one-process run: stop at once, without a checkpoint."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"second {signal.Signals(signum).name}: stopped at once, without a checkpoint")
        self.signum = int(signum)


class _SignalScope:
    """Inside ``with``, ``handler`` handles ``signums`` (when ``enabled``, in the main thread); restored on exit."""

    def __init__(self, enabled: bool, signums: Tuple[int, ...], handler: Any) -> None:
        self.enabled = enabled
        self._signums, self._handler = signums, handler
        self._previous: Dict[int, Any] = {}

    def __enter__(self) -> Any:
        if self.enabled and threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self._handler) for signum in self._signums}
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


class InterruptGuard(_SignalScope):
    """Turns the first SIGINT, SIGTERM or SIGHUP into a flag (:attr:`requested`) checked at safe points; a second
    raises :class:`StopNow`. Off in multi-process runs (the ranks would need a collective per iteration to agree)."""

    def __init__(self, enabled: bool = True) -> None:
        super().__init__(enabled, STOP_SIGNALS, self._handle)
        self.requested = False
        #: ``"SIGINT"``, ``"SIGTERM"`` or ``"SIGHUP"``: the first signal received (None before)
        self.signal_name: Optional[str] = None
        self.signum: Optional[int] = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise StopNow(signum)
        self.request(signum)

    def request(self, signum: int) -> None:
        """Note ``signum`` as the first stop request (one received before this guard, during start-up)."""
        self.requested = True
        self.signum = signum
        self.signal_name = signal.Signals(signum).name

    @property
    def reason(self) -> str:
        """How the user asked to stop, for log lines: ``"Ctrl-C"``, ``"SIGTERM"`` or ``"SIGHUP"``."""
        return "Ctrl-C" if self.signum in (None, signal.SIGINT) else str(self.signal_name)


class TerminatedByLauncher(_SignalScope):
    """In a multi-process run (``enabled``), turns SIGTERM and SIGHUP (from torchrun, or from the kernel when the
    launcher died: :func:`stop_with_parent`) into a :class:`rlearn.distributed.DistributedError` saying why."""

    #: how long a SIGTERM waits to see whether the launcher is dying (its threads exit one by one, and the
    #: kernel's parent-death signal can come before this process is handed to a new parent)
    PARENT_GRACE_S = 1.0

    def __init__(self, enabled: bool) -> None:
        super().__init__(enabled, (signal.SIGTERM, signal.SIGHUP), self._handle)
        self._parent = os.getppid()

    def _parent_gone(self) -> bool:
        deadline = time.monotonic() + self.PARENT_GRACE_S
        while os.getppid() == self._parent:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

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


def workers_ignore_sigint(asynchronous: bool) -> _SignalScope:
    """Ignore SIGINT, SIGTERM and SIGHUP while environment workers start, so they inherit "ignore" (a Ctrl-C that
    reaches every process would kill each mid-step); the main process closes them itself."""
    return _SignalScope(asynchronous, STOP_SIGNALS, signal.SIG_IGN)
