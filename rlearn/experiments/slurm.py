"""Sweeps and tuning workers on Slurm, through `submitit <https://github.com/facebookincubator/submitit>`_
(docs/cluster.md). Imported only with ``--launcher slurm``.

A sweep is one job array (``AutoExecutor.map_array``): task ``i`` trains seed ``i`` as an ordinary ``rlearn
train`` run in ``seed_<n>/``. Slurm's warning signal before a time limit or a pre-emption (``--signal=USR2@90``)
reaches the task (:meth:`_ChildTask.checkpoint`): the run saves a checkpoint and stops, and the task is requeued;
a requeue by Slurm itself (SIGTERM) stops the run the same way. Started again, the task resumes the run from its
checkpoint, so its logs equal those of an uninterrupted run. ``slurm/seed_<n>.json`` holds each task's state
(written on the node), ``slurm/logs/`` submitit's task logs.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import submitit

from rlearn.experiments.child import INTERRUPTED_CODES, ExperimentError, slurm_task, spawn, thread_settings
from rlearn.experiments.sweep import run_dir_name, start_seed

__all__ = ["parse_slurm_options", "sbatch_parameters", "SlurmRun", "SlurmTuneWorker", "SlurmSweep",
           "submit_tune_workers"]

SLURM_DIR, LOG_DIR = "slurm", "logs"
#: ``--slurm`` keys (their meaning: docs/cluster.md)
OPTIONS = ("partition", "time", "cpus_per_task", "mem", "gpus_per_task", "array_parallelism", "account", "qos",
           "constraint", "signal_delay_s", "setup", "extra")
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
    params.update({k: options[k] for k in ("partition", "mem", "gpus_per_task", "account", "qos", "constraint")
                   if k in options})
    if options.get("setup"):
        params["setup"] = [line.strip() for line in str(options["setup"]).split(";") if line.strip()]
    return params


def _submit(exp_dir: Path, name: str, options: Mapping[str, Any], task: Callable[[float], Any], items: Sequence[Any],
            dry_run: bool) -> Union[str, List[Any]]:
    """Submit one job array, a task per item (``task(stop_s)`` makes the callable, ``stop_s`` being how long
    it lets its child save a checkpoint after Slurm's warning); the jobs, or for a dry run the sbatch script."""
    folder = Path(exp_dir).resolve() / SLURM_DIR / LOG_DIR
    params = sbatch_parameters(options, name, len(items))
    if dry_run:
        from submitit.slurm.slurm import _make_sbatch_string

        command = f"{sys.executable} -u -m submitit.core._submit {folder / '%j'}"
        return _make_sbatch_string(command=command, folder=str(folder / "%j"), map_count=len(items), **params)
    folder.mkdir(parents=True, exist_ok=True)
    executor = submitit.AutoExecutor(folder=str(folder / "%j"), cluster="slurm")
    executor.update_parameters(**{f"slurm_{k}": v for k, v in params.items()})
    try:
        return executor.map_array(task(float(max(10, params["signal_delay_s"] - 10))), list(items))
    except (OSError, subprocess.CalledProcessError, submitit.core.utils.FailedJobError) as exc:
        raise ExperimentError(f"sbatch failed: {' '.join(str(exc).split())[:300]}") from exc


def status_file(exp_dir: Path, seed: int) -> Path:
    """The state file of seed ``seed``'s task."""
    return Path(exp_dir) / SLURM_DIR / f"seed_{seed}.json"


def write_status(path: Path, **values: Any) -> None:
    """Update a task's state file, atomically (it is written on the node)."""
    from rlearn.fileio import atomic_write_bytes

    old = read_status(path)
    old.update(values, updated=time.time())
    atomic_write_bytes(path, (json.dumps(old) + "\n").encode())


def read_status(path: Path) -> Dict[str, Any]:
    """A task's state file (empty when missing or unreadable)."""
    try:
        value = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


class _ChildTask(submitit.helpers.Checkpointable):
    """A Slurm task that runs one child process and, on Slurm's warning signal, stops it (SIGTERM: it saves a
    checkpoint) and asks to be requeued with the same arguments."""

    #: the child: a :class:`~rlearn.experiments.child.TrainProcess` or a ``subprocess.Popen``
    _process: Any = None
    #: seconds the child gets to save its checkpoint (the warning comes ``signal_delay_s`` before the end)
    stop_s: float = 80.0

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
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

    def __call__(self, seed: int) -> int:
        status = status_file(self.exp_dir, seed)
        attempts = int(read_status(status).get("attempts", 0)) + 1
        write_status(status, status="running", job_id=slurm_task() or "?", host=socket.gethostname(), attempts=attempts)
        overrides, env = thread_settings(self.num_threads, 1, self.cpus)
        self._process = start_seed(self.exp_dir, seed, overrides, env, print, ignored_signals=(signal.SIGUSR2,))
        if self._process is None:
            write_status(status, status="failed", exit_code=None, error="its work dir stayed locked by another process")
            raise RuntimeError(f"seed {seed}: its work dir stayed locked by another process")
        while (code := self._process.poll()) is None:  # polled: a blocking wait would hold off checkpoint()'s
            time.sleep(0.5)
        state = "finished" if code == 0 else "interrupted" if code in INTERRUPTED_CODES else "failed"
        write_status(status, status=state, exit_code=code,
                     **({"error": self._process.last_error()} if state == "failed" else {}))
        if state == "failed":
            raise RuntimeError(f"seed {seed}: rlearn train exited with {code}: {self._process.last_error()}")
        return code

    def _requeued(self, seed: int) -> None:
        write_status(status_file(self.exp_dir, seed), status="requeued")


class SlurmTuneWorker(_ChildTask):
    """Task of ``rlearn tune --launcher slurm``: one ``rlearn tune`` process (``--launcher local``) on the
    shared study; requeued, it resumes the trials it was running."""

    def __init__(self, argv: Sequence[str], cwd: Path, sampler_seed: Optional[int] = None, stop_s: float = 80.0) -> None:
        self.argv, self.cwd, self.sampler_seed, self.stop_s = list(argv), Path(cwd), sampler_seed, stop_s

    def __call__(self, worker: int) -> int:
        seed = [] if self.sampler_seed is None else ["--sampler-seed", str(self.sampler_seed + 1000 * worker)]
        self._process = spawn([sys.executable, "-m", "rlearn", *self.argv, *seed], (signal.SIGUSR2,), cwd=self.cwd)
        code = self._process.wait()
        if code not in (0, *INTERRUPTED_CODES):
            raise RuntimeError(f"tune worker {worker}: rlearn tune exited with {code}")
        return code


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
    return dict(parts for parts in (line.split() for line in done.stdout.splitlines()) if len(parts) == 2)


def submit_tune_workers(argv: Sequence[str], exp_dir: Path, workers: int, options: Mapping[str, Any],
                        dry_run: bool, sampler_seed: Optional[int] = None) -> Tuple[str, List[str]]:
    """Submit ``workers`` tasks, each ``rlearn tune ARGV`` on one shared study (worker ``i`` seeds its
    sampler with ``sampler_seed + 1000 i``); (message, job ids)."""
    jobs = _submit(exp_dir, f"rlearn-tune-{Path(exp_dir).name}", options,
                   partial(SlurmTuneWorker, argv, Path.cwd(), sampler_seed), range(workers), dry_run)
    if isinstance(jobs, str):
        return jobs, []
    return f"submitted {workers} tune worker(s) as Slurm job {jobs[0].job_id.split('_')[0]}", [j.job_id for j in jobs]


class SlurmSweep:
    """The Slurm side of a :class:`~rlearn.experiments.sweep.Sweep`: ``options`` (``--slurm`` items, parsed)
    are added to those the sweep was submitted with."""

    def __init__(self, sweep: Any, options: Mapping[str, Any]) -> None:
        self.sweep = sweep
        self.exp_dir = Path(sweep.exp_dir)
        self.options = {**(sweep.state.get("slurm") or {}), **options}
        self.runs: Dict[str, Dict[str, Any]] = sweep.state["runs"]

    def states(self) -> Dict[int, Tuple[str, Optional[str]]]:
        """Each seed's state (done, queued, running, failed, stopped or not submitted) and job id, from the
        tasks' state files and ``squeue``."""
        jobs = {seed: self.runs[str(seed)].get("job_id") for seed in self.sweep.seeds}
        unfinished = [job for seed, job in jobs.items()
                      if job and read_status(status_file(self.exp_dir, seed)).get("status") != "finished"]
        queue = squeue_states(unfinished) if unfinished else {}  # a finished sweep needs no Slurm to be read
        found = {}
        for seed, job in jobs.items():
            # read again after squeue: a task that ended meanwhile has left the queue but says so here
            status = read_status(status_file(self.exp_dir, seed)).get("status")
            if status == "finished":
                state = "done"
                self.runs[str(seed)].update(status="finished", exit_code=0)
            elif queue.get(job) in QUEUED | RUNNING:
                state = "running" if queue[job] in RUNNING or status == "running" else "queued"
            elif status == "failed":
                state = "failed"
            else:
                state = "stopped" if job else "not submitted"
            found[seed] = (state, job)
        self.sweep._save()
        return found

    def table(self, states: Mapping[int, Tuple[str, Optional[str]]]) -> List[str]:
        """One line per seed: state, job id, the run's console output and the task's Slurm log."""
        lines = []
        for seed, (state, job) in states.items():
            where = self.exp_dir / run_dir_name(seed) / "console.log"
            log = f"  slurm log {self.exp_dir / SLURM_DIR / LOG_DIR / job / f'{job}_0_log.out'}" if job else ""
            lines.append(f"  seed {seed}: {state:<13} job {job or '-':<12} {where}{log}")
        return lines

    def submit(self, seeds: Sequence[int], dry_run: bool = False) -> str:
        """Submit ``seeds`` as one job array (each task one run); the message to show (the sbatch script for
        a dry run, which submits nothing)."""
        cpus = int(self.options.get("cpus_per_task", 1))
        task = partial(SlurmRun, self.exp_dir, cpus, self.sweep.cfg.get("num_threads"))
        jobs = _submit(self.exp_dir, f"rlearn-{self.exp_dir.name}", self.options, task, seeds, dry_run)
        shown = ", ".join(map(str, seeds))
        if isinstance(jobs, str):
            return f"would submit seeds {shown} as tasks 0-{len(seeds) - 1} of one job array:\n{jobs}"
        array = jobs[0].job_id.split("_")[0]
        for seed, job in zip(seeds, jobs):
            self.runs[str(seed)].update(status="submitted", job_id=job.job_id)
            write_status(status_file(self.exp_dir, seed), status="submitted", job_id=job.job_id)
        self.sweep.state.update(launcher="slurm", slurm=self.options)
        self.sweep.state.setdefault("submissions", []).append({"array": array, "seeds": list(seeds), "time": time.time()})
        self.sweep._save()
        return f"submitted seeds {shown} as Slurm job array {array}"

    def wait(self, note: Callable[[str], None], poll_s: float = 2.0) -> Dict[int, Tuple[str, Optional[str]]]:
        """Follow the seeds until none is queued or running, telling each change of state to ``note``."""
        seen: Dict[int, str] = {}
        while True:
            states = self.states()
            for seed, (state, job) in states.items():
                if seen.get(seed) != state:
                    note(f"{time.strftime('%H:%M:%S')} seed {seed}: {state} (job {job})")
                    seen[seed] = state
            if not any(state in ("queued", "running") for state, _ in states.values()):
                return states
            time.sleep(poll_s)


def run_slurm_sweep(sweep: Any, options: Mapping[str, Any], dry_run: bool, wait: bool,
                    out: Callable[[str], None] = print) -> int:
    """``rlearn sweep ... --launcher slurm`` (and ``--out DIR`` of a Slurm sweep): show each seed's state,
    submit those neither done, queued nor running; with ``wait``, follow them to the end. The exit code: 0,
    or 1 when ``wait`` ends with a seed not done."""
    from rlearn.executables import shell_command

    slurm = SlurmSweep(sweep, options)
    states = slurm.states()
    if any(job for _, job in states.values()):
        out(f"sweep {slurm.exp_dir} on Slurm:")
        for line in slurm.table(states):
            out(line)
    todo = [seed for seed, (state, _) in states.items() if state not in ("done", "queued", "running")]
    if todo:
        out(slurm.submit(todo, dry_run))
    elif not dry_run:
        out("nothing to submit: every seed is done, queued or running")
    if dry_run:
        return 0
    if wait:
        states = slurm.wait(out)
        for line in slurm.table(states):
            out(line)
        return 0 if all(state == "done" for state, _ in states.values()) else 1
    if all(state == "done" for state, _ in states.values()):
        out(f"  report: {shell_command('rlearn', 'report', slurm.exp_dir)}")
    else:
        out(f"  state, and resubmit what stopped: {shell_command('rlearn', 'sweep', '--out', slurm.exp_dir)}")
    return 0
