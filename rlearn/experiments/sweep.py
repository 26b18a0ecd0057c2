"""``rlearn sweep``: one config over many seeds, one ``rlearn train`` process and work dir ``seed_<n>/`` per
seed (docs/experiments.md). The experiment dir holds ``config.py`` (the config every run trains) and
``sweep.json`` (seeds, overrides, each run's status, exit code and wall time).
"""

from __future__ import annotations

import re
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from rlearn.experiments.child import (
    CONSOLE_LOG, EXPERIMENT_CONFIG, FINISHED, INTERRUPTED_CODES, ExperimentError, StopSignals, TrainProcess,
    check_numbers, check_out, last_return, load_experiment_config, open_experiment_dir, save_manifest, start_run,
    thread_settings,
)
from rlearn.experiments.display import ExperimentDisplay, format_duration
from rlearn.values import is_int, is_real

__all__ = ["Sweep", "SweepResult", "parse_seeds", "train_episodes_key", "start_seed", "SWEEP_FILE", "run_dir_name",
           "MAX_SEEDS"]

SWEEP_FILE = "sweep.json"
#: the most seeds one sweep runs (more is a typo, or a job for several sweeps)
MAX_SEEDS = 10_000
#: statuses of a run in ``sweep.json``
PENDING, RUNNING, DONE, INTERRUPTED, FAILED = "pending", "running", "finished", "interrupted", "failed"


def parse_seeds(text: str) -> List[int]:
    """``"0-9"`` -> 0..9, ``"0,3,7"``, ``"0-4,10"`` (each seed once, in order); a ValueError-like
    ExperimentError names a bad part, or more than :data:`MAX_SEEDS` seeds."""
    shown = repr(text) if len(str(text)) <= 60 else repr(str(text)[:57] + "...")
    seeds: Dict[int, None] = {}
    for part in str(text).split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise ExperimentError(f"--seeds {shown}: {part[:40]!r} is not a seed or a range (e.g. 0-9 or 0,3,7)")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ExperimentError(f"--seeds {shown}: the range {part!r} is empty")
        if high - low + 1 > MAX_SEEDS:  # checked before the range is made: parsing stays linear in the seeds kept
            raise ExperimentError(f"--seeds {shown}: {high - low + 1} seeds; a sweep runs at most {MAX_SEEDS} (split "
                                  "them into several sweeps)")
        seeds.update(dict.fromkeys(range(low, high + 1)))
        if len(seeds) > MAX_SEEDS:
            raise ExperimentError(f"--seeds {shown}: {len(seeds)} seeds or more; a sweep runs at most {MAX_SEEDS} "
                                  "(split them into several sweeps)")
    return list(seeds)


def _check_state(state: Any, manifest: Path) -> Dict[str, Any]:
    """``state`` read from ``sweep.json`` if it has the shape a sweep writes; else ExperimentError naming the
    file and the first field that is wrong."""
    def bad(what: str) -> ExperimentError:
        return ExperimentError(f"{manifest}: {what}; restore it, or move it away to start the sweep afresh")

    def natural(value: Any) -> bool:
        return is_int(value) and value >= 0

    if not isinstance(state, dict):
        raise bad(f"not a JSON object (a {type(state).__name__}) as a sweep writes it")
    if not isinstance(state.get("seeds"), list) or not all(natural(s) for s in state["seeds"]):
        raise bad(f"'seeds' must be a list of seeds (integers >= 0), got {str(state.get('seeds'))[:60]}")
    if not isinstance(state.get("runs"), dict):
        raise bad(f"'runs' must be an object of seed -> run, got {str(state.get('runs'))[:60]}")
    fields = {"status": lambda v: isinstance(v, str), "attempts": natural, "wall_s": is_real,
              "work_dir": lambda v: isinstance(v, str), "exit_code": lambda v: v is None or is_int(v)}
    for key, run in state["runs"].items():
        if not isinstance(run, dict):
            raise bad(f"run {key!r} must be an object, got {str(run)[:60]}")
        for name, ok in fields.items():
            if name in run and not ok(run[name]):
                raise bad(f"run {key!r}: {name!r} is {str(run[name])[:40]!r}, not what a sweep writes")
    if "jobs" in state and not (is_int(state["jobs"]) and state["jobs"] >= 1):
        raise bad(f"'jobs' must be an integer >= 1, got {str(state['jobs'])[:40]!r}")
    if not isinstance(state.get("overrides", []), list):
        raise bad("'overrides' must be a list")
    return state


def run_dir_name(seed: int) -> str:
    """The work dir of a seed inside the experiment dir."""
    return f"seed_{seed}"


def train_episodes_key(n: int) -> str:
    """The ``metrics.jsonl`` key of the mean return of the last ``n`` training episodes (``--train-episodes``)."""
    return f"collector/episode_return_last{n}"


def start_seed(exp_dir: Path, seed: int, thread_overrides: Sequence[str], env: Mapping[str, str],
               note: Callable[[str], None], ignored_signals: Sequence[int] = ()) -> Optional[TrainProcess]:
    """Start (or resume) the run of ``seed`` in its work dir (:func:`~rlearn.experiments.child.start_run`)."""
    args = ["--seed", str(seed), *(["--set", *thread_overrides] if thread_overrides else [])]
    return start_run(exp_dir, Path(exp_dir) / run_dir_name(seed), args, env, note, f"seed {seed}", ignored_signals)


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


class Sweep:
    """A sweep of ``config`` over ``seeds`` in ``exp_dir`` (see the module doc).

    While it exists, a sweep holds the lock of ``exp_dir`` (``.lock``; :meth:`close` or the end of
    :meth:`run` releases it): a second sweep on the same dir is refused at once.

    Args:
        config: a config file or bundled config name (``rlearn train``'s CONFIG); None continues the
            sweep in ``exp_dir`` with its ``config.py``.
        seeds: the seeds to run (added to those of an existing sweep).
        exp_dir: the experiment dir (default ``experiments/<exp_name>``).
        jobs: runs at once; None: what the sweep in ``exp_dir`` was last given (stored in ``sweep.json``), else 1.
        train_episodes: also log the mean return of the last N training episodes (``rlearn report
            --train-episodes N`` reads it).
    """

    def __init__(self, config: Optional[str], seeds: Sequence[int], exp_dir: Optional[Path] = None,
                 overrides: Sequence[str] = (), jobs: Optional[int] = None, train_episodes: Optional[int] = None) -> None:
        check_numbers(jobs=jobs, train_episodes=train_episodes)
        if config is None and exp_dir is None:
            raise ExperimentError("give CONFIG, or --out of an existing sweep to continue it")
        self._lock: Any = None
        if config is None:
            config = str(Path(exp_dir) / EXPERIMENT_CONFIG)  # type: ignore[arg-type]
            if not Path(config).is_file():
                raise ExperimentError(f"{exp_dir}: no {EXPERIMENT_CONFIG} (not a sweep dir); give CONFIG to start one")
        self.cfg = load_experiment_config(config, overrides)
        if train_episodes is not None:
            add_train_episodes_stat(self.cfg, train_episodes)
        self.exp_dir = Path(exp_dir) if exp_dir is not None else Path("experiments") / self.cfg["exp_name"]
        check_out(self.exp_dir)
        if not seeds and not (self.exp_dir / SWEEP_FILE).is_file():  # before anything is created
            raise ExperimentError("--seeds is required to start a sweep (e.g. --seeds 0-9)")
        try:
            self.state = self._open(config, list(overrides), list(seeds), jobs)
        except OSError as exc:
            self.close()
            raise ExperimentError(f"{self.exp_dir}: cannot set up the sweep: {exc.strerror or exc}"
                                  + (f" ({exc.filename})" if exc.filename else "")) from exc
        except ExperimentError:
            self.close()
            raise
        self.seeds: List[int] = self.state["seeds"]
        self.jobs: int = self.state["jobs"]
        self.thread_overrides, self.thread_env = thread_settings(self.cfg["num_threads"], self.jobs)

    # ------------------------------------------------------------------------------------ the dir
    def _open(self, config: str, overrides: List[str], seeds: List[int], jobs: Optional[int]) -> Dict[str, Any]:
        """Create the experiment dir, or check that it holds a sweep of the same config; lock it; the state."""
        state = open_experiment_dir(self.exp_dir, self.cfg, SWEEP_FILE)
        self._take_lock()
        if state is None:  # no seeds were refused in __init__
            state = {"config": config, "overrides": overrides, "seeds": list(seeds), "runs": {}}
        state = _check_state(state, self.exp_dir / SWEEP_FILE)
        state["jobs"] = jobs if jobs is not None else state.get("jobs", 1)
        known = set(state["seeds"])
        state["seeds"] = state["seeds"] + [s for s in seeds if s not in known]
        if len(state["seeds"]) > MAX_SEEDS:
            raise ExperimentError(f"{self.exp_dir}: {len(state['seeds'])} seeds with the new ones; a sweep runs at most "
                                  f"{MAX_SEEDS}")
        for seed in state["seeds"]:
            state["runs"].setdefault(str(seed), {"status": PENDING, "work_dir": run_dir_name(seed), "attempts": 0,
                                                 "wall_s": 0.0, "exit_code": None})
        self._save(state)
        return state

    def _take_lock(self) -> None:
        """Hold ``exp_dir``'s lock; ExperimentError naming the sweep holding it."""
        from rlearn.workdir_lock import WorkDirBusyError, WorkDirError, WorkDirLock

        try:
            self._lock = WorkDirLock(self.exp_dir).acquire()
        except WorkDirBusyError as exc:
            who = exc.holder.describe() if exc.holder is not None else "its PID is unknown"
            raise ExperimentError(f"{self.exp_dir} is in use by another rlearn sweep ({who}); wait for it to end or "
                                  "stop it, or choose another --out") from exc
        except WorkDirError as exc:
            raise ExperimentError(str(exc)) from exc

    def close(self) -> None:
        """Release the experiment dir's lock (idempotent)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _save(self, state: Optional[Dict[str, Any]] = None) -> None:
        try:
            save_manifest(self.exp_dir, SWEEP_FILE, state if state is not None else self.state)
        except OSError as exc:
            raise ExperimentError(f"{self.exp_dir / SWEEP_FILE}: cannot be saved: {exc.strerror or exc}; the runs' "
                                  "work dirs keep what they recorded") from exc

    def _record(self, seed: int, **values: Any) -> None:
        self.state["runs"][str(seed)].update(values)
        self._save()

    def run(self, display_enabled: Optional[bool] = None, poll_s: float = 0.5) -> SweepResult:
        """Run every unfinished seed, ``jobs`` at a time; returns a :class:`SweepResult`. Releases the lock.

        SIGINT / SIGTERM (Ctrl-C): passed on to the running runs, which save a checkpoint and stop; the
        sweep waits for them and returns 130 / 143. An ``rlearn train`` exit code 2 (a mistake in the
        config) starts no further run: the sweep waits for the running ones and returns 2, the others
        stay pending.
        """
        started = time.monotonic()
        per_run = int(self.cfg["train"]["max_env_steps"])
        pending = [s for s in self.seeds if self.state["runs"][str(s)]["status"] != DONE]
        done_steps = per_run * (len(self.seeds) - len(pending))
        running: Dict[int, TrainProcess] = {}
        fatal = False
        with closing(self), StopSignals() as signals, ExperimentDisplay(
                per_run * len(self.seeds), f"sweep {self.exp_dir.name}", enabled=display_enabled) as display:
            display.note(f"sweep {self.exp_dir}: {len(self.seeds)} seeds, {len(pending)} to run, {self.jobs} at a time "
                         f"({self.thread_env['OMP_NUM_THREADS']} torch thread(s) each)")
            forwarded = 0
            while pending or running:
                if signals.requested:
                    pending = []
                    forwarded = signals.forward(list(running.values()), forwarded)
                while pending and len(running) < self.jobs and not fatal and not signals.requested:
                    seed = pending.pop(0)
                    process = start_seed(self.exp_dir, seed, self.thread_overrides, self.thread_env, display.note)
                    if process is not None:
                        running[seed] = process
                        self._record(seed, status=RUNNING, attempts=self.state["runs"][str(seed)]["attempts"] + 1)
                for seed, process in list(running.items()):
                    code = process.poll()
                    if code is None:
                        continue
                    del running[seed]
                    process.progress()
                    wall = self.state["runs"][str(seed)]["wall_s"] + time.monotonic() - process.started_at
                    if code == FINISHED:
                        done_steps += per_run
                        self._record(seed, status=DONE, exit_code=code, wall_s=round(wall, 3))
                        value = last_return(process.work_dir)
                        display.note(f"seed {seed}: finished in {format_duration(wall)}"
                                     + ("" if value is None else f", last evaluation return {value:.4g}"))
                        continue
                    status = INTERRUPTED if code in INTERRUPTED_CODES and signals.requested else FAILED
                    self._record(seed, status=status, exit_code=code, wall_s=round(wall, 3))
                    if status == INTERRUPTED:
                        display.note(f"seed {seed}: stopped at envstep {process.envstep} (checkpoint saved)")
                        continue
                    display.note(f"seed {seed}: failed with exit code {code}: {process.last_error()} "
                                 f"(see {process.work_dir / CONSOLE_LOG})")
                    if code == 2 and not fatal:
                        fatal = True  # a mistake in the config: every other run would fail the same way
                        pending = []  # they stay pending in sweep.json
                        display.note("not starting further runs: fix the config, then run the same command again")
                steps = done_steps + sum(p.progress() for p in running.values())
                finished = sum(1 for r in self.state["runs"].values() if r["status"] == DONE)
                display.update(steps, f"{finished}/{len(self.seeds)} runs done, {len(running)} running")
                if running or pending:
                    time.sleep(poll_s)
        statuses = {s: self.state["runs"][str(s)]["status"] for s in self.seeds}
        code = (0 if all(v == DONE for v in statuses.values())  # a stop after the last run's end stopped nothing
                else 128 + signals.received[0] if signals.requested else 2 if fatal else 1)
        return SweepResult(self.exp_dir, statuses, code, time.monotonic() - started)
