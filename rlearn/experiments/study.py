"""Where an ``rlearn tune`` study lives, and how several workers share it safely (docs/cluster.md).

* **Storage.** By default an Optuna journal file, ``<out>/study.journal``, which processes on one machine or
  on machines sharing the file system append to under Optuna's file lock; ``--storage`` takes an Optuna RDB
  URL or another journal file's path. :func:`open_storage` makes every failure one line (:func:`storage_error`).
* **Workers.** Each trial records its worker (host, pid and its start time, Slurm job) and a heartbeat. A
  RUNNING trial whose worker is gone is *abandoned*: :func:`retry_abandoned` fails it and queues a copy with
  the same parameters and work dir, which the next ``ask()`` of any worker resumes. Failing is atomic in the
  storage, so two workers never both retry one trial, and a live worker's trials are never taken.
* **Asking.** :class:`DirLock` makes counting and asking one step for the workers sharing an ``--out``;
  workers with their own ``--out`` are kept to ``--trials`` by :func:`is_surplus`.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock
from optuna.trial import TrialState

from rlearn.experiments.child import ExperimentError, slurm_task

__all__ = ["DEFAULT_JOURNAL", "DirLock", "open_storage", "storage_label", "storage_error", "worker_identity",
           "is_abandoned", "retry_abandoned", "requeue", "is_surplus", "COUNTED_STATES"]

#: the default study file in the experiment dir
DEFAULT_JOURNAL = "study.journal"
#: seconds an SQLite storage waits for another process's write lock before giving up
SQLITE_TIMEOUT_S = 60
#: user attributes of a trial: who runs it, and when it last said it is alive
WORKER_ATTR, HEARTBEAT_ATTR = "worker", "heartbeat"
#: trial states that count towards ``--trials``
COUNTED_STATES = ("COMPLETE", "PRUNED", "RUNNING", "WAITING")


def storage_label(spec: Optional[str], exp_dir: Path) -> str:
    """The storage as shown to the user: a journal file's path, or the URL with its password hidden."""
    if spec is None:
        return str(Path(exp_dir) / DEFAULT_JOURNAL)
    if "://" in spec:
        from sqlalchemy.engine import make_url

        try:
            return make_url(spec).render_as_string(hide_password=True)
        except Exception:  # noqa: BLE001 - not an SQLAlchemy URL: Optuna will say so
            return spec
    return spec


def open_storage(spec: Optional[str], exp_dir: Path) -> Any:
    """The Optuna storage of ``spec`` (None: the journal file in ``exp_dir``; a URL: an RDB; else a journal
    file path, relative to the working directory); ExperimentError in one line when it cannot be opened."""
    label = storage_label(spec, exp_dir)
    if spec is None or "://" not in spec:
        path = str(Path(exp_dir) / DEFAULT_JOURNAL) if spec is None else spec
        try:
            return optuna.storages.JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))
        except Exception as exc:  # noqa: BLE001 - an unreadable or damaged journal file
            raise ExperimentError(f"{label}: cannot be read as an Optuna journal file ({_one_line(exc)}); move "
                                  "it away to start a new study") from exc
    engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if spec.startswith("sqlite") else {}
    for attempt in range(3):
        try:
            return optuna.storages.RDBStorage(spec, engine_kwargs=engine_kwargs)
        except Exception as exc:  # noqa: BLE001 - wrong URL, unreachable server, missing driver, damaged file
            if attempt < 2 and "IntegrityError" in _chain_text(exc):  # two workers creating the tables at once
                time.sleep(0.5 + attempt)
                continue
            raise ExperimentError(f"--storage {label}: {storage_error(exc, label)}") from exc
    raise AssertionError("unreachable")


def _chain(exc: BaseException) -> List[BaseException]:
    seen: List[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return seen


def _chain_text(exc: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}" for e in _chain(exc))


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]


def storage_error(exc: BaseException, label: str) -> str:
    """One line saying what went wrong with the storage: a database locked by another process is named as
    such (Optuna reports it as "invalid data ... exceeding max length"), else the deepest cause."""
    text = _chain_text(exc).lower()
    if "database is locked" in text or "database table is locked" in text:
        return (f"the study database {label} stayed locked by another process for more than {SQLITE_TIMEOUT_S} s "
                "(SQLite lets one process write at a time; for several workers use the default journal storage "
                "or PostgreSQL)")
    return _one_line(_chain(exc)[-1])


class DirLock:
    """An exclusive ``flock`` on ``<exp_dir>/.tune.lock``, held while workers of one experiment dir open it,
    count and ask (not reentrant)."""

    NAME = ".tune.lock"

    def __init__(self, exp_dir: Path) -> None:
        self.path = Path(exp_dir) / self.NAME
        self._fd = -1

    def __enter__(self) -> "DirLock":
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        os.close(self._fd)  # releases the lock


def _process_start(pid: int) -> Optional[str]:
    """The start time of process ``pid`` in clock ticks since boot (tells a reused pid apart); None when
    there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def worker_identity() -> Dict[str, Any]:
    """This process as a worker: host, pid, the pid's start time and its Slurm job (``JOBID_TASK``) if any."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _process_start(pid), "slurm": slurm_task()}


def is_abandoned(frozen: Any, me: Dict[str, Any], grace_s: float, now: Optional[float] = None) -> bool:
    """Whether the RUNNING trial ``frozen`` has no live worker: its process on this host ended, it is an earlier
    run of this Slurm job, or its heartbeat is older than ``grace_s``."""
    now = time.time() if now is None else now
    worker = frozen.user_attrs.get(WORKER_ATTR)
    if isinstance(worker, dict):
        if worker == me:
            return False
        if me.get("slurm") and worker.get("slurm") == me["slurm"]:
            return True  # an earlier run of this Slurm job (requeued): its process is gone
        if worker.get("host") == me["host"] and _process_start(int(worker.get("pid", 0))) != worker.get("start"):
            return True  # its process on this host has ended
    beat = frozen.user_attrs.get(HEARTBEAT_ATTR)
    if beat is None:  # asked a moment ago, before its worker claimed it: judge by its start
        started = frozen.datetime_start
        beat = started.timestamp() if started is not None else now
    return now - float(beat) > grace_s


def retry_abandoned(study: Any, me: Dict[str, Any], grace_s: float) -> List[int]:
    """Fail each abandoned RUNNING trial and queue a copy (same parameters, user attributes and reported
    evaluations; system attribute ``failed_trial``); the numbers of the trials taken over. A trial another
    worker takes over first is left to it."""
    taken = []
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if is_abandoned(frozen, me, grace_s) and requeue(study, frozen):
            taken.append(frozen.number)
    return taken


def requeue(study: Any, frozen: Any) -> bool:
    """Fail the RUNNING trial ``frozen`` and queue a copy (same parameters and user attributes but its
    worker's; system attributes ``failed_trial`` / ``retry_history`` as Optuna's RetryFailedTrialCallback
    writes them); False when another worker finished or took it first."""
    try:
        study._storage.set_trial_state_values(frozen._trial_id, TrialState.FAIL)
    except UpdateFinishedTrialError:
        return False
    attrs = {k: v for k, v in frozen.user_attrs.items() if k not in (WORKER_ATTR, HEARTBEAT_ATTR)}
    history = [*frozen.system_attrs.get("retry_history", []), frozen.number]
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.WAITING, params=frozen.params, distributions=frozen.distributions, user_attrs=attrs,
        system_attrs={"failed_trial": history[0], "retry_history": history}))
    return True


def is_surplus(study: Any, number: int, trials: int) -> bool:
    """Whether trial ``number`` (just asked) is beyond ``trials``: as many counted trials have a smaller
    number (two workers without a shared ``--out`` asked at the same moment)."""
    earlier = [t for t in study.get_trials(deepcopy=False) if t.number < number and t.state.name in COUNTED_STATES]
    return len(earlier) >= trials
