"""Re-launch an ``rlearn`` command through ``torchrun`` on this machine (``rlearn train CONFIG --nproc N``).

``torchrun`` starts N copies of ``python -m rlearn ...`` with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT`` set, supervises them (a rank that exits with an error makes it stop
the others) and exits non-zero when one failed. :func:`relaunch` builds that command line, runs it and
returns its exit code::

    python -m torch.distributed.run --nproc_per_node N --master_addr 127.0.0.1 --master_port <free port> \\
        -m rlearn train CONFIG ...        # the same arguments, without --nproc

The processes import the same ``rlearn`` as this one: they run with ``PYTHONSAFEPATH=1`` (Python 3.11+),
so a folder named ``rlearn`` or ``policies`` in the working directory is not imported in its place
(:func:`launch_environment`); ``python -m rlearn`` itself takes both from its installation.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence

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
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"--nproc must be an int >= 1, got {nproc!r}")
    port = find_free_port(master_addr) if master_port is None else int(master_port)
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc_per_node", str(nproc),
        "--master_addr", master_addr,
        "--master_port", str(port),
        "-m", "rlearn", *rlearn_args,
    ]


def launch_environment(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment of torchrun and the processes it starts: ``environ`` (default ``os.environ``) with
    :data:`LAUNCHED_ENV` set and ``PYTHONSAFEPATH=1``, so that ``-m rlearn`` does not put the working
    directory before the installed packages. When this process itself has the working directory on
    ``sys.path`` (``python -m rlearn``), it goes first on ``PYTHONPATH`` instead: the config's
    ``custom_imports`` by module name find the same modules in every process."""
    env = dict(os.environ if environ is None else environ)
    env[LAUNCHED_ENV] = "1"
    env["PYTHONSAFEPATH"] = "1"
    first = sys.path[0] if sys.path else None
    if first is not None and os.path.realpath(first or os.curdir) == os.path.realpath(os.curdir):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
    return env


_PR_SET_PDEATHSIG = 1


def _load_libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


#: loaded once at import (so that calling prctl in a freshly forked child loads nothing)
_LIBC = _load_libc()


def stop_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``).

    Used by the ranks of a multi-process run (the parent is ``torchrun``) and by ``rlearn --nproc`` for the
    ``torchrun`` it starts, so that killing the launcher (even with SIGKILL) never leaves ranks training
    unsupervised. Returns False where it is not available (not Linux). If the parent already died before
    the call (we were re-parented), ``signum`` is sent right away.
    """
    prctl = getattr(_LIBC, "prctl", None) if _LIBC is not None else None
    if prctl is None or prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        return False
    if os.getppid() == 1:  # the parent died before prctl: the kernel will not signal us
        os.kill(os.getpid(), signum)
    return True


def relaunch(nproc: int, rlearn_args: Sequence[str]) -> int:
    """Run ``rlearn <rlearn_args>`` in ``nproc`` processes through ``torchrun``; returns its exit code.

    Ctrl-C from a terminal reaches the whole process group (torchrun and its workers); this process
    passes it on once (in case it was signalled alone) and waits for torchrun to stop the workers. If this
    process is killed, torchrun gets SIGTERM from the kernel (``prctl(PR_SET_PDEATHSIG)``) and stops the
    ranks, which also stop when torchrun itself dies (see :func:`stop_with_parent`).
    """
    if os.environ.get(LAUNCHED_ENV):
        raise RuntimeError(f"already launched by torchrun ({LAUNCHED_ENV} is set); refusing to launch again")
    command = torchrun_command(nproc, rlearn_args)
    env = launch_environment()
    # if this process dies (even SIGKILLed), the kernel sends torchrun SIGTERM, and torchrun stops the ranks
    process = subprocess.Popen(command, env=env, preexec_fn=stop_with_parent)
    forwarded = False
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            if not forwarded:
                forwarded = True
                process.send_signal(signal.SIGINT)
