"""One ``rlearn train`` process of an experiment: start it, follow its files, stop it.

Each run of a sweep or a study is ``python -m rlearn train ... --work-dir DIR --no-progress`` in its own
process and session, console output in ``DIR/console.log``. It gets SIGTERM when the experiment process dies
(:func:`rlearn.run.signals.stop_with_parent`): it saves a checkpoint and stops, and a restarted experiment
resumes it. A Ctrl-C reaches only the experiment process, which passes it on (:meth:`TrainProcess.send_signal`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

__all__ = ["ExperimentError", "check_numbers", "check_out", "JsonlTail", "TrainProcess", "available_cores",
           "thread_settings", "wait_until_free", "spawn", "start_run", "last_return", "slurm_task", "CONSOLE_LOG",
           "FINISHED", "INTERRUPTED_CODES"]

#: the run's console output (stdout and stderr) in its work dir
CONSOLE_LOG = "console.log"
#: exit code of a finished run; codes of a run stopped by Ctrl-C / SIGTERM after saving a checkpoint
FINISHED, INTERRUPTED_CODES = 0, (130, 143)


class ExperimentError(ValueError):
    """A bad argument, config or experiment directory; the message names the culprit."""


#: the least value of each number option of ``rlearn sweep`` and ``rlearn tune``
MINIMUM = {"jobs": 1, "train_episodes": 1, "trials": 1, "startup_trials": 0, "warmup_steps": 0, "sampler_seed": 0}


def check_numbers(**values: Any) -> None:
    """ExperimentError naming the option (``--train-episodes`` for ``train_episodes``) whose value cannot be
    used; None passes."""
    for name, value in values.items():
        option = "--" + name.replace("_", "-")
        if value is None:
            continue
        if name == "heartbeat":
            if not value > 0:
                raise ExperimentError(f"{option} must be > 0 seconds, got {value}")
        elif value < MINIMUM[name]:
            raise ExperimentError(f"{option} must be >= {MINIMUM[name]}, got {value}")
        elif name == "sampler_seed" and value >= 2 ** 32:
            raise ExperimentError(f"{option} must be below 2**32, got {value}")


def check_out(exp_dir: Path) -> None:
    """ExperimentError when ``exp_dir`` (``--out``) or a directory above it is a file."""
    from rlearn.run.workdir import check_directory

    check_directory(exp_dir, "--out", "--out", ExperimentError)


def available_cores() -> int:
    """CPU cores this process may use (its affinity mask; ``os.cpu_count()`` where that is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def thread_settings(config_threads: Optional[int], jobs: int, cores: Optional[int] = None) -> Tuple[List[str], Dict[str, str]]:
    """``(--set overrides, environment variables)`` giving each of ``jobs`` concurrent runs at most
    ``cores // jobs`` torch threads (at least 1); a config's smaller ``num_threads`` is kept. ``OMP_NUM_THREADS``
    and ``MKL_NUM_THREADS`` cap the libraries' own thread pools the same way.
    """
    share = max(1, (cores or available_cores()) // max(1, jobs))
    overrides = [] if config_threads is not None and config_threads <= share else [f"num_threads={share}"]
    threads = str(min(share, config_threads) if config_threads is not None else share)
    return overrides, {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


class JsonlTail:
    """Reads the complete rows appended to a JSON-lines file since the last call; a rewritten file (a resumed
    run replaces it) is read again from the start, counted in :attr:`restarted`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._offset = 0
        self._inode: Optional[int] = None
        self.restarted = 0

    def new_rows(self) -> List[Dict[str, Any]]:
        """The complete rows written since the previous call (a line that does not parse is skipped)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return []
        if self._inode is not None and (stat.st_ino != self._inode or stat.st_size < self._offset):
            self._offset = 0
            self.restarted += 1
        self._inode = stat.st_ino
        if stat.st_size == self._offset:
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        rows = []
        for line in data[:end].splitlines():
            try:
                rows.append(json.loads(line))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
        return rows


def mean_return(row: Mapping[str, Any]) -> Optional[float]:
    """The mean episode return of an ``evaluations.jsonl`` row; None when it has no returns."""
    returns = [float(v) for v in row.get("returns") or []]
    return sum(returns) / len(returns) if returns else None


def last_return(work_dir: Path) -> Optional[float]:
    """The mean return of the last evaluation in ``work_dir``'s ``evaluations.jsonl``; None without one."""
    rows = JsonlTail(Path(work_dir) / "evaluations.jsonl").new_rows()
    return mean_return(rows[-1]) if rows else None


def slurm_task() -> Optional[str]:
    """This process's Slurm job: ``JOBID_TASK`` in a job array, else ``JOBID``; None outside Slurm."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID") or os.environ.get("SLURM_JOB_ID")
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{job}_{task}" if job and task else job


def wait_until_free(work_dir: Path, timeout_s: float = 120.0, on_wait: Any = None) -> bool:
    """Wait until no live process holds ``work_dir``'s lock (a run of an experiment killed a moment ago may
    still be saving its checkpoint); True when free, False after ``timeout_s``. ``on_wait(holder)`` is
    called once when it has to wait."""
    from rlearn.workdir_lock import WorkDirBusyError, WorkDirError, WorkDirLock

    deadline = time.monotonic() + timeout_s
    while Path(work_dir).is_dir():
        try:
            WorkDirLock(work_dir).acquire().release()
            return True
        except WorkDirBusyError as exc:
            if on_wait is not None:
                on_wait(exc.holder)
                on_wait = None  # once
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        except WorkDirError:
            return True  # not a lockable directory: the run itself will say what is wrong
    return True


def spawn(argv: Sequence[str], ignored_signals: Sequence[int] = (), **popen: Any) -> subprocess.Popen:
    """``subprocess.Popen(argv, **popen)`` whose process gets SIGTERM when this one dies and ignores
    ``ignored_signals`` (e.g. Slurm's warning signal, meant for the task, not its child)."""
    from rlearn.run.signals import stop_with_parent

    def prepare() -> None:  # in the child before exec
        stop_with_parent()
        for signum in ignored_signals:
            signal.signal(signum, signal.SIG_IGN)

    return subprocess.Popen(argv, preexec_fn=prepare, **popen)


class TrainProcess:
    """``python -m rlearn train CONFIG --work-dir WORK_DIR --no-progress [ARGS]`` in its own process, with
    ``env`` added to this process's environment (thread caps)."""

    def __init__(self, config: Path, work_dir: Path, args: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
                 ignored_signals: Sequence[int] = ()) -> None:
        self.work_dir = Path(work_dir)
        self.ignored_signals = tuple(ignored_signals)
        self.argv = [sys.executable, "-m", "rlearn", "train", str(config), "--work-dir", str(self.work_dir),
                     "--no-progress", *args]
        self.env = {**os.environ, **(env or {}), "RLEARN_NO_PROGRESS": "1"}
        self.metrics = JsonlTail(self.work_dir / "metrics.jsonl")
        self.evaluations = JsonlTail(self.work_dir / "evaluations.jsonl")
        self.envstep = 0
        self.started_at = 0.0  # time.monotonic() at the start
        self._process: Optional[subprocess.Popen] = None

    def start(self) -> "TrainProcess":
        """Start the process (console output appended to ``console.log`` in the work dir)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with open(self.work_dir / CONSOLE_LOG, "ab") as console:
            console.write(f"$ {' '.join(self.argv)}\n".encode())
            console.flush()
            self._process = spawn(self.argv, self.ignored_signals, stdin=subprocess.DEVNULL, stdout=console,
                                  stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.started_at = time.monotonic()
        return self

    def poll(self) -> Optional[int]:
        """The exit code once the process has ended (a signal's: ``128 + signum``), else None."""
        code = self._process.poll() if self._process is not None else None
        return None if code is None else (128 - code if code < 0 else code)

    def wait(self, timeout: Optional[float] = None) -> int:
        """Wait for the end (``subprocess.TimeoutExpired`` after ``timeout``); the exit code as in :meth:`poll`."""
        assert self._process is not None, "start() first"
        self._process.wait(timeout)
        return self.poll()  # type: ignore[return-value]  # never None once it has ended

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the run while it runs (SIGTERM or SIGINT: it saves a checkpoint and stops; twice: at
        once)."""
        if self._process is not None:
            self._process.send_signal(signum)  # does nothing once the process has ended

    def progress(self) -> int:
        """The run's env steps so far, from the last row of its ``metrics.jsonl``."""
        for row in self.metrics.new_rows():
            self.envstep = max(self.envstep, int(row.get("envstep", 0)))
        return self.envstep

    def last_error(self, lines: int = 200) -> str:
        """The last ``rlearn train: error:`` line (or the last line) of the console output, for messages."""
        try:
            text = (self.work_dir / CONSOLE_LOG).read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        errors = [line for line in text if "error:" in line or "Error" in line]
        return (errors or text or [""])[-1].strip()


class StopSignals:
    """While active (main thread only), SIGINT and SIGTERM sent to the experiment process are recorded in
    :attr:`received` instead of raising, to be passed on to its runs (:meth:`forward`)."""

    def __init__(self) -> None:
        self.received: List[int] = []
        self._previous: Dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return bool(self.received)

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.received.append(signum)

    def forward(self, processes: Iterable[TrainProcess], sent: int) -> int:
        """Send each of ``processes`` the signals received after the first ``sent`` (the first makes a run save
        a checkpoint and stop, a second stops it at once); returns how many are sent now."""
        for signum in self.received[sent:]:
            for process in processes:
                process.send_signal(signum)
        return len(self.received)

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


def load_experiment_config(spec: str, overrides: Sequence[str] = ()) -> Dict[str, Any]:
    """The resolved config of an experiment (``rlearn train``'s loading); ExperimentError on a mistake."""
    from rlearn.config import ConfigError, load_config

    try:
        return load_config(spec, overrides=list(overrides))
    except ConfigError as exc:
        raise ExperimentError(" ".join(str(exc).split())) from exc


#: the resolved config of an experiment, in its dir; every run of the experiment trains it
EXPERIMENT_CONFIG = "config.py"


def open_experiment_dir(exp_dir: Path, cfg: Mapping[str, Any], manifest_name: str,
                        allowed: Sequence[str] = ()) -> Optional[Dict[str, Any]]:
    """The manifest of the experiment in ``exp_dir`` (None for a new one: the dir is created and ``cfg``
    written to its ``config.py``). An existing experiment of another config (apart from ``seed`` and
    ``num_threads``) or a dir without the manifest holding anything but ``allowed`` entries is refused: one
    dir never mixes two experiments."""
    from rlearn.experiments.membership import config_differences

    exp_dir = Path(exp_dir)
    manifest, config_file = exp_dir / manifest_name, exp_dir / EXPERIMENT_CONFIG
    if not manifest.is_file():
        if exp_dir.exists() and (not exp_dir.is_dir() or any(p.name not in allowed for p in exp_dir.iterdir())):
            raise ExperimentError(f"{str(exp_dir)!r} exists and is not an experiment dir of this kind (no "
                                  f"{manifest_name}); choose an empty or new directory")
        exp_dir.mkdir(parents=True, exist_ok=True)
        dump_experiment_config(cfg, config_file)
        return None
    try:
        state = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ExperimentError(f"{manifest}: cannot be read ({exc}); move it away to start afresh") from exc
    changes = config_differences(load_experiment_config(str(config_file)), cfg, ignored=("seed", "num_threads"))
    if changes:
        shown = "; ".join(changes[:5]) + ("; ..." if len(changes) > 5 else "")
        raise ExperimentError(f"{exp_dir} holds an experiment of another config ({shown}); continue it with the "
                              "same CONFIG and --set, or choose another --out")
    return state


def save_manifest(exp_dir: Path, manifest_name: str, state: Mapping[str, Any]) -> None:
    """Write an experiment's manifest atomically (a kill never leaves half a file)."""
    from rlearn.fileio import atomic_write_bytes

    atomic_write_bytes(Path(exp_dir) / manifest_name, (json.dumps(state, indent=1) + "\n").encode("utf-8"))


def has_checkpoint(work_dir: Path) -> bool:
    """Whether ``work_dir`` holds a checkpoint a run can be resumed from (``rlearn train --resume``)."""
    ckpt = Path(work_dir) / "ckpt"  # best.pt alone is not one: --resume takes latest.pt or iteration_<n>.pt
    return (ckpt / "latest.pt").is_file() or any(ckpt.glob("iteration_*.pt"))


def clear_unresumable(work_dir: Path) -> bool:
    """Empty a work dir whose run stopped before its first checkpoint (nothing to resume; its partial logs
    would be duplicated by the new start), keeping ``console.log``; True when something was removed."""
    work_dir = Path(work_dir)
    if not work_dir.is_dir() or has_checkpoint(work_dir):
        return False
    entries = [entry for entry in work_dir.iterdir() if entry.name != CONSOLE_LOG]
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return bool(entries)


def start_run(exp_dir: Path, work_dir: Path, args: Sequence[str], env: Mapping[str, str],
              note: Callable[[str], None], name: str, ignored_signals: Sequence[int] = ()) -> Optional[TrainProcess]:
    """Start ``rlearn train`` of the experiment's ``config.py`` in ``work_dir`` once no live process holds it,
    resumed from its checkpoint or else from scratch (:func:`clear_unresumable`); each step is told to
    ``note`` as ``"<name>: ..."``. None when the dir stays busy."""
    def waiting(holder: Any) -> None:
        held_by = f" ({holder.describe()})" if holder else ""
        note(f"{name}: waiting for the previous run in {work_dir} to stop{held_by}")

    if not wait_until_free(work_dir, on_wait=waiting):
        note(f"{name}: {work_dir} is still held by another process; skipped")
        return None
    if has_checkpoint(work_dir):
        args = [*args, "--resume"]
        note(f"{name}: resuming {work_dir}")
    elif clear_unresumable(work_dir):
        note(f"{name}: {work_dir} had no checkpoint; starting it again from scratch")
    return TrainProcess(Path(exp_dir) / EXPERIMENT_CONFIG, work_dir, args, env=env, ignored_signals=ignored_signals).start()


def dump_experiment_config(cfg: Mapping[str, Any], path: Path) -> Path:
    """Write ``cfg`` as a config file (:func:`rlearn.config.dump_config`) that is not a run's: its header
    says how to train it, without the "continue this run" line of a work dir's ``config.py``."""
    from rlearn.config import dump_config

    path = dump_config(cfg, path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines[:8]):
        if line.startswith("# or continue this run with:"):
            del lines[i:i + 2]
            break
    path.write_text("".join(lines), encoding="utf-8")
    return path
