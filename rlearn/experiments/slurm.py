"""Sweeps and tuning workers on Slurm, through `submitit <https://github.com/facebookincubator/submitit>`_.

Imported only with ``--launcher slurm``. ``rlearn sweep CONFIG --seeds 0-9 --launcher slurm --slurm KEY=VALUE
...`` submits one job array (``AutoExecutor.map_array``): task ``i`` trains seed ``i`` of the sweep as an
ordinary ``rlearn train`` run in its own work dir ``seed_<n>/``. Slurm's warning signal before a time limit or
a pre-emption (``--signal=USR2@90``) reaches the task (:meth:`SlurmRun.checkpoint`): the run saves a
checkpoint and stops, and the task is requeued; a requeue by Slurm itself (``scontrol requeue``, a
pre-emption with ``SIGTERM``) stops the run the same way. Started again, the task resumes the run from its
checkpoint (``rlearn train --resume``), so its logs equal those of an uninterrupted run.

The experiment dir holds ``sweep.json`` (with the Slurm options and each seed's job id), ``slurm/logs/``
(submitit's task logs: ``<array>_<task>_0_log.out`` / ``.err``) and ``slurm/seed_<n>.json`` (each task's
state, written on the node). ``rlearn sweep --out DIR`` shows each seed's state (queued, running, done,
failed, stopped) from those files and ``squeue``, and submits again only the seeds that are neither done nor
queued nor running.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import submitit

from rlearn.experiments.child import ExperimentError, start_run, thread_settings

__all__ = ["parse_slurm_options", "sbatch_parameters", "SlurmRun", "SlurmTuneWorker", "submit_tune_workers"]

SLURM_DIR, LOG_DIR = "slurm", "logs"
#: ``--slurm`` keys: meaning, and the submitit parameter each sets
OPTIONS = {
    "partition": "the partition (sbatch --partition)",
    "time": "time limit per task: minutes, HH:MM:SS or D-HH:MM:SS (default 60)",
    "cpus_per_task": "CPUs per task (default 1); the run gets as many torch threads at most",
    "mem": "memory per task, e.g. 4G (sbatch --mem)",
    "gpus_per_task": "GPUs per task",
    "array_parallelism": "tasks of the array running at once (default: all)",
    "account": "the account to charge (sbatch --account)",
    "qos": "the quality of service (sbatch --qos)",
    "constraint": "node features (sbatch --constraint)",
    "signal_delay_s": "seconds before the time limit at which a task checkpoints and is requeued (default 90)",
    "setup": "shell lines run before the task, separated by ';' (e.g. module load, source a venv)",
    "extra": "further sbatch options, e.g. 'exclude=node3 mail-type=END'",
}
#: states ``squeue`` shows for a job that will still run
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "CONFIGURING"}
RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"}


def _minutes(text: str) -> int:
    """Slurm's time formats (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]) in whole minutes, at least 1."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+(?::\d+){0,2})", text.strip())
    if not match:
        raise ExperimentError(f"--slurm time={text!r}: not minutes, HH:MM:SS or D-HH:MM:SS")
    days, parts = int(match.group(1) or 0), [int(p) for p in match.group(2).split(":")]
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
    else:
        hours, minutes, seconds = ([0] * (3 - len(parts)) + parts) if len(parts) == 3 else (0, *(parts + [0])[:2])
    return max(1, days * 1440 + hours * 60 + minutes + (1 if seconds else 0))


def parse_slurm_options(items: Sequence[str]) -> Dict[str, Any]:
    """``["partition=gpu", "time=4:00:00", ...]`` -> options; ExperimentError naming a bad item."""
    options: Dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in OPTIONS:
            raise ExperimentError(f"--slurm {item!r}: expected KEY=VALUE with KEY one of {', '.join(OPTIONS)}")
        if key in ("cpus_per_task", "gpus_per_task", "array_parallelism", "signal_delay_s"):
            if not value.isdigit() or int(value) < (0 if key == "signal_delay_s" else 1):
                raise ExperimentError(f"--slurm {item!r}: {key} must be a positive whole number")
            options[key] = int(value)
        elif key == "time":
            options[key] = _minutes(value)
        else:
            options[key] = value
    return options


def sbatch_parameters(options: Mapping[str, Any], name: str, tasks: int) -> Dict[str, Any]:
    """The submitit Slurm parameters (``_make_sbatch_string`` names) of ``options``."""
    extra: Dict[str, Any] = {"requeue": True}
    for token in str(options.get("extra", "")).split():
        key, sep, value = token.lstrip("-").partition("=")
        extra[key.replace("_", "-")] = value if sep else True
    params: Dict[str, Any] = {"job_name": name, "time": int(options.get("time", 60)),
                              "cpus_per_task": int(options.get("cpus_per_task", 1)),
                              "array_parallelism": int(options.get("array_parallelism", tasks)),
                              "signal_delay_s": int(options.get("signal_delay_s", 90)),
                              "additional_parameters": extra}
    for key in ("partition", "mem", "gpus_per_task", "account", "qos", "constraint"):
        if key in options:
            params[key] = options[key]
    if options.get("setup"):
        params["setup"] = [line.strip() for line in str(options["setup"]).split(";") if line.strip()]
    return params


def make_executor(folder: Path, params: Mapping[str, Any]) -> Any:
    executor = submitit.AutoExecutor(folder=str(folder / "%j"), cluster="slurm")
    executor.update_parameters(**{f"slurm_{k}": v for k, v in params.items()})
    return executor


def dry_run_script(folder: Path, params: Mapping[str, Any], tasks: int) -> str:
    """The sbatch script submitit would submit for an array of ``tasks``."""
    import sys

    from submitit.slurm.slurm import _make_sbatch_string

    command = f"{sys.executable} -u -m submitit.core._submit {folder / '%j'}"
    return _make_sbatch_string(command=command, folder=str(folder / "%j"), map_count=tasks, **params)


def stop_s(params: Mapping[str, Any]) -> float:
    """How long a task lets its child save a checkpoint after Slurm's warning: the warning's lead, less 10 s."""
    return float(max(10, int(params.get("signal_delay_s", 90)) - 10))


def _task_id() -> str:
    job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{job}_{task}" if job and task else os.environ.get("SLURM_JOB_ID", "?")


def write_status(path: Path, **values: Any) -> None:
    """A task's state file, written atomically on the node."""
    from rlearn.fileio import atomic_write_bytes

    old = read_status(path)
    old.update(values, updated=time.time())
    atomic_write_bytes(path, (json.dumps(old) + "\n").encode())


def read_status(path: Path) -> Dict[str, Any]:
    try:
        value = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


class _ChildTask(submitit.helpers.Checkpointable):
    """A Slurm task that runs one child process and, on Slurm's warning signal, stops it (SIGTERM: it saves a
    checkpoint) and asks to be requeued with the same arguments."""

    _process: Any = None
    #: seconds the child gets to save its checkpoint (the warning comes ``signal_delay_s`` before the end)
    stop_s: float = 80.0

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        process = self._process
        if process is not None and process.poll() is None:
            process.send(signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_s)
            except subprocess.TimeoutExpired:
                pass
        self._requeued(*args)
        fresh = type(self).__new__(type(self))
        fresh.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_process"})
        return submitit.helpers.DelayedSubmission(fresh, *args, **kwargs)

    def _requeued(self, *args: Any) -> None:
        """Note that the task is requeued."""


class SlurmRun(_ChildTask):
    """Task of a sweep's job array: ``rlearn train`` of seed ``seed`` in ``<exp_dir>/seed_<seed>``, resumed from
    its checkpoint when there is one."""

    def __init__(self, exp_dir: Path, cpus: int, num_threads: Optional[int], stop_s: float = 80.0) -> None:
        self.exp_dir, self.cpus, self.num_threads, self.stop_s = Path(exp_dir).resolve(), cpus, num_threads, stop_s

    def status_file(self, seed: int) -> Path:
        return self.exp_dir / SLURM_DIR / f"seed_{seed}.json"

    def __call__(self, seed: int) -> int:
        status = self.status_file(seed)
        attempts = int(read_status(status).get("attempts", 0)) + 1
        write_status(status, status="running", job_id=_task_id(), host=socket.gethostname(), attempts=attempts)
        overrides, env = thread_settings(self.num_threads, 1, self.cpus)
        args = ["--seed", str(seed), *(["--set", *overrides] if overrides else [])]
        self._process = start_run(self.exp_dir, self.exp_dir / f"seed_{seed}", args, env, print, f"seed {seed}",
                                  ignored_signals=(signal.SIGUSR2,))
        if self._process is None:
            write_status(status, status="failed", exit_code=None, error="its work dir stayed locked by another process")
            raise RuntimeError(f"seed {seed}: its work dir stayed locked by another process")
        while self._process.poll() is None:
            time.sleep(0.5)
        code = self._process.wait()
        state = "finished" if code == 0 else "interrupted" if code in (130, 143) else "failed"
        write_status(status, status=state, exit_code=code,
                     **({"error": self._process.last_error()} if state == "failed" else {}))
        if state == "failed":
            raise RuntimeError(f"seed {seed}: rlearn train exited with {code}: {self._process.last_error()}")
        return code

    def _requeued(self, seed: int) -> None:
        write_status(self.status_file(seed), status="requeued")


class SlurmTuneWorker(_ChildTask):
    """Task of ``rlearn tune --launcher slurm``: one ``rlearn tune`` process (``--launcher local``) on the
    shared study; requeued, it resumes the trials it was running."""

    def __init__(self, argv: Sequence[str], cwd: Path, sampler_seed: Optional[int] = None, stop_s: float = 80.0) -> None:
        self.argv, self.cwd, self.sampler_seed, self.stop_s = list(argv), Path(cwd), sampler_seed, stop_s

    def __call__(self, worker: int) -> int:
        import sys

        from rlearn.run.signals import stop_with_parent

        def prepare() -> None:
            stop_with_parent()
            signal.signal(signal.SIGUSR2, signal.SIG_IGN)

        seed = [] if self.sampler_seed is None else ["--sampler-seed", str(self.sampler_seed + 1000 * worker)]
        child = subprocess.Popen([sys.executable, "-m", "rlearn", *self.argv, *seed], cwd=self.cwd, preexec_fn=prepare)
        self._process = _Popen(child)
        code = child.wait()
        if code not in (0, 130, 143):
            raise RuntimeError(f"tune worker {worker}: rlearn tune exited with {code}")
        return code


class _Popen:
    """The two methods of TrainProcess that :meth:`_ChildTask.checkpoint` uses, for a plain Popen."""

    def __init__(self, child: subprocess.Popen) -> None:
        self.child = child

    def poll(self) -> Optional[int]:
        return self.child.poll()

    def send(self, signum: int) -> None:
        self.child.send_signal(signum)

    def wait(self, timeout: Optional[float] = None) -> int:
        return self.child.wait(timeout)


def squeue_states(job_ids: Sequence[str]) -> Dict[str, str]:
    """``{"<array>_<task>": state}`` of the given jobs that Slurm still knows (queued, running, ending)."""
    arrays = sorted({str(j).split("_")[0] for j in job_ids if j})
    if not arrays:
        return {}
    try:
        done = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T", "-j", ",".join(arrays)], capture_output=True,
                              text=True, timeout=60)
    except FileNotFoundError as exc:
        raise ExperimentError("squeue is not found: run this on a Slurm login node") from exc
    states = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def submit_tune_workers(argv: Sequence[str], exp_dir: Path, workers: int, options: Mapping[str, Any],
                        dry_run: bool, sampler_seed: Optional[int] = None) -> Tuple[str, List[str]]:
    """Submit ``workers`` tasks, each ``rlearn tune ARGV`` on one shared study (worker ``i`` seeds its
    sampler with ``sampler_seed + 1000 i``); (message, job ids)."""
    folder = Path(exp_dir).resolve() / SLURM_DIR / LOG_DIR
    params = sbatch_parameters(options, f"rlearn-tune-{Path(exp_dir).name}", workers)
    if dry_run:
        return dry_run_script(folder, params, workers), []
    folder.mkdir(parents=True, exist_ok=True)
    executor = make_executor(folder, params)
    try:
        worker = SlurmTuneWorker(argv, Path.cwd(), sampler_seed, stop_s(params))
        jobs = executor.map_array(worker, list(range(workers)))
    except (FileNotFoundError, subprocess.CalledProcessError, submitit.core.utils.FailedJobError) as exc:
        raise ExperimentError(f"sbatch failed: {' '.join(str(exc).split())[:300]}") from exc
    array = jobs[0].job_id.split("_")[0]
    return f"submitted {workers} tune worker(s) as Slurm job {array}", [j.job_id for j in jobs]
