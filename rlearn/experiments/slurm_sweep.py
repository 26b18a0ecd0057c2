"""A sweep on Slurm: one job array, a state per seed, resubmission of the unfinished seeds (see
:mod:`rlearn.experiments.slurm`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from rlearn.experiments.child import ExperimentError

__all__ = ["SlurmSweep", "SEED_STATES"]

#: what ``rlearn sweep --out DIR`` says of a seed of a Slurm sweep
SEED_STATES = ("done", "queued", "running", "failed", "stopped", "not submitted")


class SlurmSweep:
    """The Slurm side of a :class:`~rlearn.experiments.sweep.Sweep`: ``options`` (``--slurm`` items, parsed)
    are added to those the sweep was submitted with."""

    def __init__(self, sweep: Any, options: Mapping[str, Any]) -> None:
        self.sweep = sweep
        self.exp_dir = Path(sweep.exp_dir)
        self.options = {**(sweep.state.get("slurm") or {}), **options}

    @property
    def runs(self) -> Dict[str, Dict[str, Any]]:
        return self.sweep.state["runs"]

    def status_file(self, seed: int) -> Path:
        from rlearn.experiments.slurm import SLURM_DIR

        return self.exp_dir / SLURM_DIR / f"seed_{seed}.json"

    def log_file(self, job_id: str) -> Path:
        from rlearn.experiments.slurm import LOG_DIR, SLURM_DIR

        return self.exp_dir / SLURM_DIR / LOG_DIR / job_id / f"{job_id}_0_log.out"

    def states(self) -> Dict[int, Tuple[str, Optional[str]]]:
        """Each seed's state (one of :data:`SEED_STATES`) and job id, from the tasks' state files and ``squeue``."""
        from rlearn.experiments.slurm import QUEUED, RUNNING, read_status, squeue_states

        jobs = {seed: self.runs[str(seed)].get("job_id") for seed in self.sweep.seeds}
        unfinished = [job for seed, job in jobs.items()
                      if job and read_status(self.status_file(seed)).get("status") != "finished"]
        queue = squeue_states(unfinished) if unfinished else {}  # a finished sweep needs no Slurm to be read
        found = {}
        for seed, job in jobs.items():
            status = read_status(self.status_file(seed)).get("status")
            if status == "finished":
                state = "done"
                if self.runs[str(seed)].get("status") != "finished":
                    self.runs[str(seed)].update(status="finished", exit_code=0)
            elif job in queue and queue[job] in QUEUED | RUNNING:
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
            where = self.exp_dir / f"seed_{seed}" / "console.log"
            log = f"  slurm log {self.log_file(job)}" if job else ""
            lines.append(f"  seed {seed}: {state:<13} job {job or '-':<12} {where}{log}")
        return lines

    def submit(self, seeds: Sequence[int], dry_run: bool = False) -> str:
        """Submit ``seeds`` as one job array (each task one run); the message to show (the sbatch script for
        a dry run, which submits nothing)."""
        import submitit

        from rlearn.experiments.slurm import (
            LOG_DIR, SLURM_DIR, SlurmRun, make_executor, dry_run_script, sbatch_parameters, stop_s, write_status,
        )

        folder = self.exp_dir.resolve() / SLURM_DIR / LOG_DIR
        params = sbatch_parameters(self.options, f"rlearn-{self.exp_dir.name}", len(seeds))
        if dry_run:
            return (f"would submit seeds {', '.join(map(str, seeds))} as tasks 0-{len(seeds) - 1} of one job array:\n"
                    + dry_run_script(folder, params, len(seeds)))
        folder.mkdir(parents=True, exist_ok=True)
        task = SlurmRun(self.exp_dir, int(self.options.get("cpus_per_task", 1)), self.sweep.cfg.get("num_threads"),
                        stop_s(params))
        try:
            jobs = make_executor(folder, params).map_array(task, list(seeds))
        except (FileNotFoundError, OSError, submitit.core.utils.FailedJobError) as exc:
            raise ExperimentError(f"sbatch failed: {' '.join(str(exc).split())[:300]}") from exc
        array = jobs[0].job_id.split("_")[0]
        for seed, job in zip(seeds, jobs):
            self.runs[str(seed)].update(status="submitted", job_id=job.job_id)
            write_status(self.status_file(seed), status="submitted", job_id=job.job_id)
        self.sweep.state.update(launcher="slurm", slurm=self.options)
        self.sweep.state.setdefault("submissions", []).append({"array": array, "seeds": list(seeds), "time": time.time()})
        self.sweep._save()
        return f"submitted seeds {', '.join(map(str, seeds))} as Slurm job array {array}"

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
    from rlearn.executables import shell_command

    if all(state == "done" for state, _ in states.values()):
        out(f"  report: {shell_command('rlearn', 'report', slurm.exp_dir)}")
    else:
        out(f"  state, and resubmit what stopped: {shell_command('rlearn', 'sweep', '--out', slurm.exp_dir)}")
    return 0


def run_slurm_commands(sweep: Any, args: Any) -> int:
    """``rlearn sweep`` with ``--launcher slurm`` or on a Slurm sweep's ``--out``: the exit code (2 with one
    line for a bad ``--slurm`` item or a missing submitit / Slurm)."""
    from rlearn.commands import fail

    try:
        from rlearn.experiments.slurm import parse_slurm_options
    except ImportError as exc:
        return fail("sweep", f"--launcher slurm needs submitit ({exc}); install it with: pip install 'rlearn[slurm]'")
    try:
        return run_slurm_sweep(sweep, parse_slurm_options(args.slurm_options), args.dry_run, args.wait)
    except ExperimentError as exc:
        return fail("sweep", exc)
