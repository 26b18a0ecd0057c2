"""``rlearn sweep``: one config over many seeds, one ``rlearn train`` process and one work dir per seed.

The experiment dir holds ``config.py`` (the resolved config every run trains), ``sweep.json`` (seeds,
overrides, each run's status, exit code and wall time) and one work dir ``seed_<n>/`` per seed. Up to ``jobs``
runs at once share the cores (:func:`~rlearn.experiments.child.thread_settings`). Started again on the same
dir, a sweep skips finished runs, resumes the others from their checkpoint and starts those that never ran;
another config is refused, naming the keys that differ.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from rlearn.experiments.child import (
    CONSOLE_LOG, EXPERIMENT_CONFIG, FINISHED, INTERRUPTED_CODES, ExperimentError, StopSignals, TrainProcess,
    load_experiment_config, mean_return, open_experiment_dir, save_manifest, start_run, thread_settings,
)
from rlearn.experiments.display import ExperimentDisplay, format_duration

__all__ = ["Sweep", "SweepResult", "parse_seeds", "train_episodes_key", "SWEEP_FILE", "run_dir_name"]

SWEEP_FILE = "sweep.json"
#: statuses of a run in ``sweep.json``
PENDING, RUNNING, DONE, INTERRUPTED, FAILED = "pending", "running", "finished", "interrupted", "failed"


def parse_seeds(text: str) -> List[int]:
    """``"0-9"`` -> 0..9, ``"0,3,7"``, ``"0-4,10"``; a ValueError-like ExperimentError names a bad part."""
    seeds: List[int] = []
    for part in str(text).split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise ExperimentError(f"--seeds {text!r}: {part!r} is not a seed or a range (e.g. 0-9 or 0,3,7)")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ExperimentError(f"--seeds {text!r}: the range {part!r} is empty")
        seeds.extend(s for s in range(low, high + 1) if s not in seeds)
    return seeds


def run_dir_name(seed: int) -> str:
    """The work dir of a seed inside the experiment dir."""
    return f"seed_{seed}"


def train_episodes_key(n: int) -> str:
    """The ``metrics.jsonl`` key of the mean return of the last ``n`` training episodes (``--train-episodes``)."""
    return f"collector/episode_return_last{n}"


def add_train_episodes_stat(cfg: Dict[str, Any], n: int) -> None:
    """Make the run log the mean return of its last ``n`` training episodes (:func:`train_episodes_key`)."""
    entries = cfg["learner"]["log_processor"]["custom_cfg"]
    entry = dict(data_src="collector/episode_return", method_name="mean", log_name=f"episode_return_last{n}", last_n=n)
    if entry not in entries:
        entries.append(entry)


@dataclass
class SweepResult:
    """What a sweep did: each seed's status (``finished``, ``interrupted``, ``failed``, ``pending``), the
    exit code the command returns, and the wall time."""

    exp_dir: Path
    statuses: Dict[int, str]
    exit_code: int
    wall_s: float
    errors: Dict[int, str] = field(default_factory=dict)


class Sweep:
    """A sweep of ``config`` over ``seeds`` in ``exp_dir`` (see the module doc).

    Args:
        config: a config file or bundled config name (``rlearn train``'s CONFIG); None continues the
            sweep in ``exp_dir`` with its ``config.py``.
        seeds: the seeds to run (added to those of an existing sweep).
        exp_dir: the experiment dir (default ``experiments/<exp_name>``).
        train_episodes: also log the mean return of the last N training episodes (``rlearn report
            --train-episodes N`` reads it).
    """

    def __init__(self, config: Optional[str], seeds: Sequence[int], exp_dir: Optional[Path] = None,
                 overrides: Sequence[str] = (), jobs: int = 1, train_episodes: Optional[int] = None) -> None:
        if jobs < 1:
            raise ExperimentError(f"--jobs must be >= 1, got {jobs}")
        if train_episodes is not None and train_episodes < 1:
            raise ExperimentError(f"--train-episodes must be >= 1, got {train_episodes}")
        if config is None and exp_dir is None:
            raise ExperimentError("give CONFIG, or --out of an existing sweep to continue it")
        self.jobs = jobs
        if config is None:
            config = str(Path(exp_dir) / EXPERIMENT_CONFIG)  # type: ignore[arg-type]
            if not Path(config).is_file():
                raise ExperimentError(f"{exp_dir}: no {EXPERIMENT_CONFIG} (not a sweep dir); give CONFIG to start one")
        self.cfg = load_experiment_config(config, overrides)
        if train_episodes is not None:
            add_train_episodes_stat(self.cfg, train_episodes)
        self.exp_dir = Path(exp_dir) if exp_dir is not None else Path("experiments") / self.cfg["exp_name"]
        self.state = self._open(config, list(overrides), list(seeds))
        self.seeds: List[int] = self.state["seeds"]
        self.thread_overrides, self.thread_env = thread_settings(self.cfg["num_threads"], jobs)

    # ------------------------------------------------------------------------------------ the dir
    def _open(self, config: str, overrides: List[str], seeds: List[int]) -> Dict[str, Any]:
        """Create the experiment dir, or check that it holds a sweep of the same config; the state."""
        state = open_experiment_dir(self.exp_dir, self.cfg, SWEEP_FILE)
        if state is None:
            if not seeds:
                raise ExperimentError("--seeds is required to start a sweep (e.g. --seeds 0-9)")
            state = {"config": config, "overrides": overrides, "seeds": list(seeds), "runs": {}}
        state["seeds"] = state["seeds"] + [s for s in seeds if s not in state["seeds"]]
        for seed in state["seeds"]:
            state["runs"].setdefault(str(seed), {"status": PENDING, "work_dir": run_dir_name(seed), "attempts": 0,
                                                 "wall_s": 0.0, "exit_code": None})
        self._save(state)
        return state

    def _save(self, state: Optional[Dict[str, Any]] = None) -> None:
        save_manifest(self.exp_dir, SWEEP_FILE, state if state is not None else self.state)

    def run_dir(self, seed: int) -> Path:
        return self.exp_dir / run_dir_name(seed)

    def _record(self, seed: int, **values: Any) -> None:
        self.state["runs"][str(seed)].update(values)
        self._save()

    # ------------------------------------------------------------------------------------ running
    def _start(self, seed: int, display: ExperimentDisplay) -> Optional[TrainProcess]:
        """Start (or resume) the run of ``seed``; None when its dir stays busy."""
        args = ["--seed", str(seed), *(["--set", *self.thread_overrides] if self.thread_overrides else [])]
        process = start_run(self.exp_dir, self.run_dir(seed), args, self.thread_env, display.note, f"seed {seed}")
        if process is not None:
            self._record(seed, status=RUNNING, attempts=self.state["runs"][str(seed)]["attempts"] + 1)
        return process

    def run(self, display_enabled: Optional[bool] = None, poll_s: float = 0.5) -> SweepResult:
        """Run every unfinished seed, ``jobs`` at a time; returns a :class:`SweepResult`.

        SIGINT / SIGTERM (Ctrl-C): passed on to the running runs, which save a checkpoint and stop; the
        sweep waits for them and returns 130 / 143. An ``rlearn train`` exit code 2 (a mistake in the
        config) starts no further run.
        """
        started = time.monotonic()
        per_run = int(self.cfg["train"]["max_env_steps"])
        pending = [s for s in self.seeds if self.state["runs"][str(s)]["status"] != DONE]
        done_steps = per_run * (len(self.seeds) - len(pending))
        running: Dict[int, TrainProcess] = {}
        errors: Dict[int, str] = {}
        stop_code: Optional[int] = None
        fatal = False
        with StopSignals() as signals, ExperimentDisplay(per_run * len(self.seeds), f"sweep {self.exp_dir.name}",
                                                          enabled=display_enabled) as display:
            display.note(f"sweep {self.exp_dir}: {len(self.seeds)} seeds, {len(pending)} to run, {self.jobs} at a time "
                         f"({self.thread_env['OMP_NUM_THREADS']} torch thread(s) each)")
            forwarded = 0
            while pending or running:
                if signals.requested:
                    stop_code = 128 + signals.received[0]
                    pending = []
                    forwarded = signals.forward(list(running.values()), forwarded)
                while pending and len(running) < self.jobs and not fatal and not signals.requested:
                    seed = pending.pop(0)
                    process = self._start(seed, display)
                    if process is not None:
                        running[seed] = process
                for seed, process in list(running.items()):
                    code = process.poll()
                    if code is None:
                        continue
                    del running[seed]
                    process.progress()
                    wall = self.state["runs"][str(seed)]["wall_s"] + time.monotonic() - (process.started_at or time.monotonic())
                    if code == FINISHED:
                        done_steps += per_run
                        self._record(seed, status=DONE, exit_code=code, wall_s=round(wall, 3))
                        display.note(f"seed {seed}: finished in {format_duration(wall)}" + _last_return(process))
                        continue
                    status = INTERRUPTED if code in INTERRUPTED_CODES and signals.requested else FAILED
                    self._record(seed, status=status, exit_code=code, wall_s=round(wall, 3))
                    if status == INTERRUPTED:
                        display.note(f"seed {seed}: stopped at envstep {process.envstep} (checkpoint saved)")
                        continue
                    errors[seed] = process.last_error()
                    display.note(f"seed {seed}: failed with exit code {code}: {errors[seed]} "
                                 f"(see {process.work_dir / CONSOLE_LOG})")
                    if code == 2 and not fatal:
                        fatal = True  # a mistake in the config: every other run would fail the same way
                        display.note("not starting further runs: fix the config, then run the same command again")
                steps = done_steps + sum(p.progress() for p in running.values())
                finished = sum(1 for r in self.state["runs"].values() if r["status"] == DONE)
                display.update(steps, f"{finished}/{len(self.seeds)} runs done, {len(running)} running")
                if running or pending:
                    time.sleep(poll_s)
        statuses = {s: self.state["runs"][str(s)]["status"] for s in self.seeds}
        if stop_code is not None:
            code = stop_code
        elif all(v == DONE for v in statuses.values()):
            code = 0
        else:
            code = 2 if fatal else 1
        return SweepResult(self.exp_dir, statuses, code, time.monotonic() - started, errors)


def _last_return(process: TrainProcess) -> str:
    rows = process.evaluations.new_rows()
    value = mean_return(rows[-1]) if rows else None
    return "" if value is None else f", last evaluation return {value:.4g}"
