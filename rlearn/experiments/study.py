"""Where an ``rlearn tune`` study lives, and how several workers share it safely.

* **Storage.** By default the study is an Optuna journal file, ``<out>/study.journal``, written under
  Optuna's file lock (:class:`optuna.storages.journal.JournalFileOpenLock`), which any number of processes on
  one machine, or on machines sharing the file system, may append to at once. ``--storage`` takes any Optuna
  RDB URL (``postgresql://...`` for machines without a shared file system, ``sqlite:///...`` for one process)
  or the path of another journal file. :func:`open_storage` turns each into an Optuna storage and every
  failure into one line (:func:`storage_error`).
* **Workers.** Each trial records the worker running it (host, process id and start time, Slurm job) and a
  heartbeat (a timestamp renewed every few seconds). A RUNNING trial whose worker is gone (a dead process
  on this host, an earlier incarnation of this Slurm job, or a heartbeat older than the grace period) is
  *abandoned*: :func:`retry_abandoned` fails it and queues a copy with the same parameters and work dir, which the next ``ask()`` of any worker picks up and resumes. Failing is atomic in the
  storage, so two workers never both retry one trial, and a live worker's trials are never taken.
* **Asking.** :class:`DirLock` (an ``flock`` on ``<out>/.tune.lock``) makes counting and asking one step for
  the workers sharing an ``--out``; workers on other machines with their own ``--out`` are kept to
  ``--trials`` by :func:`is_surplus`.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from rlearn.experiments.child import ExperimentError

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


def _is_url(spec: str) -> bool:
    return "://" in spec


def storage_label(spec: Optional[str], exp_dir: Path) -> str:
    """The storage as shown to the user: a journal file's path, or the URL with its password hidden."""
    if spec is None:
        return str(Path(exp_dir) / DEFAULT_JOURNAL)
    if _is_url(spec):
        from sqlalchemy.engine import make_url

        try:
            return make_url(spec).render_as_string(hide_password=True)
        except Exception:  # noqa: BLE001 - not an SQLAlchemy URL: Optuna will say so
            return spec
    return spec


def open_storage(spec: Optional[str], exp_dir: Path) -> Any:
    """The Optuna storage of ``spec`` (None: the journal file in ``exp_dir``; a URL: an RDB; else a journal
    file path, relative to the working directory); ExperimentError in one line when it cannot be opened."""
    import optuna

    label = storage_label(spec, exp_dir)
    if spec is None or not _is_url(spec):
        from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

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
    """An exclusive ``flock`` on ``<exp_dir>/.tune.lock`` (reentrant within one object), held while workers of
    one experiment dir open it, count and ask."""

    NAME = ".tune.lock"

    def __init__(self, exp_dir: Path) -> None:
        self.path = Path(exp_dir) / self.NAME
        self._fd: Optional[int] = None
        self._depth = 0

    def __enter__(self) -> "DirLock":
        if self._depth == 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


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
    job = os.environ.get("SLURM_ARRAY_JOB_ID") or os.environ.get("SLURM_JOB_ID")
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    return {"host": socket.gethostname(), "pid": pid, "start": _process_start(pid),
            "slurm": f"{job}_{task}" if job and task else job}


def is_abandoned(frozen: Any, me: Dict[str, Any], grace_s: float, now: Optional[float] = None) -> bool:
    """Whether the RUNNING trial ``frozen`` has no live worker (see the module doc)."""
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
    if beat is None:  # asked a moment ago, or by an older rlearn: judge by its start
        started = frozen.datetime_start
        beat = started.timestamp() if started is not None else now
    return now - float(beat) > grace_s


def retry_abandoned(study: Any, me: Dict[str, Any], grace_s: float) -> List[int]:
    """Fail each abandoned RUNNING trial and queue a copy (same parameters, user attributes and reported
    evaluations; system attribute ``failed_trial``); the numbers of the trials taken over. A trial another
    worker takes over first is left to it."""
    from optuna.trial import TrialState

    taken = []
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if is_abandoned(frozen, me, grace_s) and requeue(study, frozen):
            taken.append(frozen.number)
    return taken


def requeue(study: Any, frozen: Any) -> bool:
    """Fail the RUNNING trial ``frozen`` and queue a copy (same parameters and user attributes but its
    worker's; system attributes ``failed_trial`` / ``retry_history`` as Optuna's RetryFailedTrialCallback
    writes them); False when another worker finished or took it first."""
    import optuna
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

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
