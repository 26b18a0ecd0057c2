"""Re-launch an ``rlearn`` command through ``torchrun`` on this machine (``rlearn train CONFIG --nproc N``):
:func:`relaunch` runs ``python -m rlearn.distributed.launch`` (torchrun, through :func:`main`)."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence

from rlearn.values import is_int

__all__ = ["find_free_port", "torchrun_command", "relaunch", "launch_environment", "stop_with_parent",
           "LAUNCHED_ENV"]

#: set in the children's environment, so a launched process never launches again
LAUNCHED_ENV = "RLEARN_TORCHRUN_CHILD"


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def torchrun_command(nproc: int, rlearn_args: Sequence[str], master_port: Optional[int] = None,
                     master_addr: str = "127.0.0.1") -> List[str]:
    """The ``torchrun`` command line that runs ``python -m rlearn <rlearn_args>`` in ``nproc`` processes."""
    if not is_int(nproc) or nproc < 1:
        raise ValueError(f"--nproc must be an int >= 1, got {nproc!r}")
    port = find_free_port(master_addr) if master_port is None else int(master_port)
    return [sys.executable, "-m", "rlearn.distributed.launch", "--nproc_per_node", str(nproc),
            "--master_addr", master_addr, "--master_port", str(port), "-m", "rlearn", *rlearn_args]


def launch_environment(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``environ`` (default ``os.environ``) with :data:`LAUNCHED_ENV` and ``PYTHONSAFEPATH=1`` (a folder ``rlearn``
    in the working directory is not imported instead of the installed one); the working directory goes first on
    ``PYTHONPATH`` if it is on this process's ``sys.path``, so ``custom_imports`` find the same modules in every
    rank."""
    env = dict(os.environ if environ is None else environ)
    env[LAUNCHED_ENV] = "1"
    env["PYTHONSAFEPATH"] = "1"
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == os.path.realpath(os.curdir):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
    return env


_PR_SET_PDEATHSIG = 1
try:  # libc's prctl on Linux, loaded at import so that calling it in a freshly forked child loads nothing
    _PRCTL: Any = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _PRCTL = None


def stop_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``), so
    a killed launcher never leaves ranks training unsupervised; False where not available (not Linux)."""
    if _PRCTL is None or _PRCTL(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        return False
    if os.getppid() == 1:  # the parent died before prctl: the kernel will not signal us
        os.kill(os.getpid(), signum)
    return True


def relaunch(nproc: int, rlearn_args: Sequence[str]) -> int:
    """Run ``rlearn <rlearn_args>`` in ``nproc`` processes through ``torchrun``; returns its exit code. Ctrl-C,
    SIGTERM and SIGHUP are passed on to torchrun once; if this process dies, the kernel sends torchrun SIGTERM
    (:func:`stop_with_parent`)."""
    if os.environ.get(LAUNCHED_ENV):
        raise RuntimeError(f"already launched by torchrun ({LAUNCHED_ENV} is set); refusing to launch again")
    process = subprocess.Popen(torchrun_command(nproc, rlearn_args), env=launch_environment(),
                               preexec_fn=stop_with_parent)
    forwarded = False

    def forward(signum: int, frame: Any = None) -> None:  # torchrun stops the ranks, which log it
        nonlocal forwarded
        if not forwarded:
            forwarded = True
            process.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                return process.wait()
            except KeyboardInterrupt:
                forward(signal.SIGINT)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


#: the exit code of a rank that stopped on a mistake in the config or the checkpoint (one line on its stderr)
USAGE_ERROR_EXIT = 2


def main(argv: Optional[Sequence[str]] = None) -> int:
    """torchrun (``python -m torch.distributed.run ARGS``), quiet about two ends the ranks already logged: when the
    first rank to fail stopped on a config or checkpoint error (exit code 2) torchrun's report of it is left out
    and the exit code is 2; when torchrun was stopped by a signal it exits 128 + the signal, without a traceback."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    held = _HeldErrors(_handlers_of(logging.getLogger("torch.distributed.elastic")))
    usage_error = False
    try:
        torchrun_main(list(argv) if argv is not None else None)
    except ChildFailedError as exc:
        usage_error = exc.get_first_failure()[1].exitcode == USAGE_ERROR_EXIT
        if not usage_error:
            raise
    except SignalException as exc:  # stopped by a signal: the ranks were stopped too, and each logged why
        first = exc
        while isinstance(first.__context__, SignalException):  # a second signal while stopping the ranks
            first = first.__context__
        return 128 + int(first.sigval)
    finally:
        held.close(show=not usage_error)  # the rank said why; torchrun's report of it would bury that line
    return USAGE_ERROR_EXIT if usage_error else 0


def _handlers_of(logger: Optional[logging.Logger]) -> List[logging.Handler]:
    """The handlers that write ``logger``'s records (its own and its parents' up to one that does not
    propagate; torch's loggers have their own)."""
    found: List[logging.Handler] = []
    while logger is not None:
        found += logger.handlers
        if not logger.propagate:
            break
        logger = logger.parent
    return found


class _HeldErrors:
    """A logging filter on ``handlers`` that holds torchrun's ERROR records (written when a rank fails) until
    :meth:`close`, so that they can be left out when the rank stopped on a config error."""

    def __init__(self, handlers: Sequence[Any]) -> None:
        self.handlers = list(handlers)
        self.records: List[Any] = []
        for handler in self.handlers:
            handler.addFilter(self)

    def filter(self, record: Any) -> bool:
        if record.levelno >= logging.ERROR and record.name.startswith("torch.distributed.elastic"):
            self.records.append(record)
            return False
        return True

    def close(self, show: bool) -> None:
        """Stop holding; write the held records when ``show``."""
        for handler in self.handlers:
            handler.removeFilter(self)
        records, self.records = self.records, []
        for record in records if show else ():
            for handler in self.handlers:
                handler.handle(record)


if __name__ == "__main__":
    sys.exit(main())
