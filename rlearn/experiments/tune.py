"""``rlearn tune``: an Optuna study whose trials are ordinary ``rlearn train`` runs.

The experiment dir holds ``config.py`` (the base config), ``tune.json`` (storage URL, study name, space file,
overrides), ``study.db`` (the SQLite study; any Optuna RDB URL with ``--storage``), one work dir
``trial_<n>/`` per trial and ``best_config.py`` (the best trial's full config, trainable as is).

``SPACE.py`` defines ``space(trial)`` returning ``--set`` overrides sampled with the Optuna trial, and may
define ``pruner()`` and ``sampler()`` (default ``MedianPruner`` and ``TPESampler``). Each trial runs in its own
process; a worker thread per job reports each evaluation's mean return to Optuna and, when the pruner says
so, stops the trial (it saves a checkpoint) and notes it in the trial's log and TensorBoard. A finished
trial's objective is its last evaluation's mean return (maximised). Started again, the study resumes the
trials this machine was running and asks new ones until ``trials`` are complete, pruned or running.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from rlearn.experiments.child import (
    CONSOLE_LOG, EXPERIMENT_CONFIG, INTERRUPTED_CODES, ExperimentError, StopSignals, TrainProcess,
    dump_experiment_config, load_experiment_config, mean_return, open_experiment_dir, save_manifest, start_run,
    thread_settings,
)
from rlearn.experiments.display import ExperimentDisplay

__all__ = ["Tuner", "TuneResult", "load_space", "override_text", "TUNE_FILE", "BEST_CONFIG"]

TUNE_FILE = "tune.json"
BEST_CONFIG = "best_config.py"
#: consecutive failed trials after which the study stops (a broken space or config fails every trial)
MAX_FAILURES_IN_A_ROW = 3


@dataclass
class Space:
    """What ``SPACE.py`` defines: ``space(trial) -> overrides`` and optional ``pruner()`` / ``sampler()``."""

    path: Path
    space: Callable[[Any], Mapping[str, Any]]
    pruner: Optional[Callable[[], Any]] = None
    sampler: Optional[Callable[[], Any]] = None


def load_space(path: Path) -> Space:
    """Import ``SPACE.py`` (ExperimentError naming the file when it cannot be run or has no ``space``)."""
    from rlearn.config import ConfigError
    from rlearn.config.loading import import_file

    try:
        module = import_file(path)
    except ConfigError as exc:
        raise ExperimentError(f"--space: {' '.join(str(exc).split())}") from exc
    space = getattr(module, "space", None)
    if not callable(space):
        raise ExperimentError(f"--space {str(path)!r} must define a function space(trial) returning --set overrides, "
                              "e.g. {'policy.lr': trial.suggest_float('lr', 1e-4, 1e-2, log=True)}")
    return Space(Path(path), space, getattr(module, "pruner", None), getattr(module, "sampler", None))


def override_text(key: str, value: Any) -> str:
    """``key=value`` as ``--set`` reads it (a string as it is, anything else as its Python literal)."""
    return f"{key}={value if isinstance(value, str) else repr(value)}"


def _sampled_overrides(space: Space, trial: Any) -> List[str]:
    values = space.space(trial)
    if not isinstance(values, Mapping) or not all(isinstance(k, str) for k in values):
        raise ExperimentError(f"{space.path}: space(trial) must return a dict of dotted config keys to values, "
                              f"got {type(values).__name__}")
    return [override_text(k, v) for k, v in values.items()]


@dataclass
class TuneResult:
    """What a tuning command did: trial counts by state, the best trial, the exit code."""

    exp_dir: Path
    counts: Dict[str, int]
    best_number: Optional[int]
    best_value: Optional[float]
    best_params: Dict[str, Any]
    best_config: Optional[Path]
    exit_code: int
    study_name: str
    storage: str


class Tuner:
    """An Optuna study over ``config`` (see the module doc).

    Args:
        trials: complete + pruned (+ running) trials the study should reach.
        exp_dir: the experiment dir (default ``experiments/<exp_name>_tune``).
        storage: an Optuna RDB URL (default ``sqlite:///<exp_dir>/study.db``).
        jobs: trials at once on this machine.
        study_name: default: the config's ``exp_name``.
        startup_trials, warmup_steps: the default ``MedianPruner``'s ``n_startup_trials`` and
            ``n_warmup_steps`` (env steps).
        sampler_seed: seed of the default ``TPESampler`` (a continued study seeds it with ``sampler_seed +
            trials so far``, so it does not repeat the first trials' parameters).
    """

    def __init__(self, config: str, space_file: Path, trials: int, exp_dir: Optional[Path] = None,
                 storage: Optional[str] = None, jobs: int = 1, overrides: Sequence[str] = (),
                 study_name: Optional[str] = None, startup_trials: int = 5, warmup_steps: int = 0,
                 sampler_seed: Optional[int] = None) -> None:
        import optuna

        if trials < 1 or jobs < 1:
            raise ExperimentError(f"--trials and --jobs must be >= 1, got {trials} and {jobs}")
        self.trials, self.jobs = trials, jobs
        self.space = load_space(Path(space_file))
        self.cfg = load_experiment_config(config, overrides)
        self.exp_dir = Path(exp_dir) if exp_dir is not None else Path("experiments") / f"{self.cfg['exp_name']}_tune"
        state = open_experiment_dir(self.exp_dir, self.cfg, TUNE_FILE)
        created = state is None
        if state is None:
            state = {"config": config, "overrides": list(overrides), "space": str(space_file),
                     "storage": storage or f"sqlite:///{(self.exp_dir / 'study.db').resolve()}",
                     "study_name": study_name or self.cfg["exp_name"]}
        elif storage is not None and storage != state["storage"]:
            raise ExperimentError(f"{self.exp_dir} tunes the study in {state['storage']}, not {storage}; give the same "
                                  "--storage or another --out")
        save_manifest(self.exp_dir, TUNE_FILE, state)
        self.storage_url, self.study_name = state["storage"], study_name or state["study_name"]
        self.thread_overrides, self.thread_env = thread_settings(self.cfg["num_threads"], jobs)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        pruner = self.space.pruner() if self.space.pruner else optuna.pruners.MedianPruner(
            n_startup_trials=startup_trials, n_warmup_steps=warmup_steps)
        sampler = self.space.sampler() if self.space.sampler else optuna.samplers.TPESampler(seed=sampler_seed)
        engine_kwargs = {"connect_args": {"timeout": 60}} if self.storage_url.startswith("sqlite") else {}
        try:
            storage = optuna.storages.RDBStorage(self.storage_url, engine_kwargs=engine_kwargs)
            self.study = optuna.create_study(storage=storage, study_name=self.study_name, direction="maximize",
                                             load_if_exists=True, sampler=sampler, pruner=pruner)
        except Exception as exc:  # noqa: BLE001 - a wrong URL, an unreachable database, a missing driver
            if created:  # leave nothing behind, so that the same command with a working --storage starts afresh
                for name in (TUNE_FILE, EXPERIMENT_CONFIG):
                    (self.exp_dir / name).unlink(missing_ok=True)
                if not any(self.exp_dir.iterdir()):
                    self.exp_dir.rmdir()
            raise ExperimentError(f"--storage {self.storage_url}: {type(exc).__name__}: "
                                  f"{' '.join(str(exc).split())[:300]}") from exc
        asked = len(self.study.get_trials(deepcopy=False))
        if sampler_seed is not None and asked and not self.space.sampler:
            # a seeded sampler started again would draw the first trials' parameters again: go on from the
            # number of trials the study has (a different stream for each restart)
            self.study.sampler = optuna.samplers.TPESampler(seed=sampler_seed + asked)
        self.host = socket.gethostname()
        self._lock = threading.Lock()
        self._failures_in_a_row = 0
        self.aborted: Optional[str] = None
        self._running: Dict[int, TrainProcess] = {}

    def trial_dir(self, number: int) -> Path:
        return self.exp_dir / f"trial_{number}"

    def _trial_config(self, overrides: Sequence[str]) -> Dict[str, Any]:
        return load_experiment_config(str(self.exp_dir / EXPERIMENT_CONFIG), overrides)

    # ----------------------------------------------------------------------------- choosing trials
    def _counted(self) -> int:
        from optuna.trial import TrialState

        states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
        return len(self.study.get_trials(deepcopy=False, states=states))

    def _orphans(self) -> List[Any]:
        """Trials of this machine and dir left RUNNING by a killed tuner (resumed first)."""
        from optuna.trial import TrialState

        found = []
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            attrs = frozen.user_attrs
            if attrs.get("host") == self.host and Path(attrs.get("work_dir", "")).resolve().parent == self.exp_dir.resolve():
                found.append(frozen)
        return found

    def _next(self, orphans: List[Any], stop: StopSignals) -> Optional[Any]:
        """The next trial to run: an orphan to resume, or a new one asked from the study; None when done."""
        import optuna

        with self._lock:
            if stop.requested or self.aborted:
                return None
            if orphans:
                frozen = orphans.pop(0)
                return optuna.trial.Trial(self.study, frozen._trial_id), frozen
            if self._counted() >= self.trials:
                return None
            return self.study.ask(), None

    # ----------------------------------------------------------------------------- one trial
    def _run_trial(self, trial: Any, frozen: Any, stop: StopSignals, display: ExperimentDisplay) -> None:
        from optuna.trial import TrialState

        work_dir = self.trial_dir(trial.number)
        try:
            if frozen is None:
                overrides = _sampled_overrides(self.space, trial)
            else:
                overrides = list(frozen.user_attrs.get("overrides", []))
            budget = self._trial_config(overrides)["train"]["max_env_steps"]
        except ExperimentError as exc:
            self._fail(trial, f"trial {trial.number}: {exc}", display)
            return
        if frozen is None:
            for key, value in (("work_dir", str(work_dir.resolve())), ("host", self.host), ("overrides", overrides)):
                trial.set_user_attr(key, value)
            reported: Dict[int, float] = {}
            display.note(f"trial {trial.number}: {' '.join(overrides)} -> {work_dir}")
        else:
            reported = dict(frozen.intermediate_values)
        process = start_run(self.exp_dir, work_dir, ["--set", *overrides, *self.thread_overrides], self.thread_env,
                            display.note, f"trial {trial.number}")
        if process is None:
            return
        with self._lock:
            self._running[trial.number] = process
        pruned_at = None
        forwarded = 0
        while process.poll() is None:
            forwarded = stop.forward([process], forwarded)  # Ctrl-C / SIGTERM of the tuner: checkpoint and stop
            for row in process.evaluations.new_rows():
                step, value = int(row["envstep"]), mean_return(row)
                if value is None or step in reported or pruned_at is not None:
                    continue
                trial.report(value, step)
                reported[step] = value
                if step < budget and trial.should_prune():  # the final evaluation: nothing left to save
                    pruned_at = (step, value, int(row.get("train_iter", 0)))
                    process.send(15)  # SIGTERM: the run saves a checkpoint and stops
            time.sleep(0.5)
        code = process.wait()
        with self._lock:
            self._running.pop(trial.number, None)
        if pruned_at is not None:
            self._mark_pruned(trial, work_dir, *pruned_at)
            self.study.tell(trial, state=TrialState.PRUNED)
            display.note(f"trial {trial.number}: pruned at envstep {pruned_at[0]} (evaluation return {pruned_at[1]:.4g})")
        elif code == 0:
            final = _last_evaluation(work_dir)
            if final is None:
                self._fail(trial, f"trial {trial.number}: finished without an evaluation", display)
                return
            self.study.tell(trial, final)
            self._failures_in_a_row = 0
            display.note(f"trial {trial.number}: finished, last evaluation return {final:.4g}")
        elif code in INTERRUPTED_CODES and stop.requested:
            display.note(f"trial {trial.number}: stopped (checkpoint saved); the next `rlearn tune` resumes it")
        else:
            self._fail(trial, f"trial {trial.number}: rlearn train exited with {code}: {process.last_error()} "
                              f"(see {work_dir / CONSOLE_LOG})", display)

    def _fail(self, trial: Any, message: str, display: ExperimentDisplay) -> None:
        from optuna.trial import TrialState

        trial.set_user_attr("error", message)
        self.study.tell(trial, state=TrialState.FAIL)
        display.note(message)
        with self._lock:
            self._failures_in_a_row += 1
            if self._failures_in_a_row >= MAX_FAILURES_IN_A_ROW and not self.aborted:
                self.aborted = f"{MAX_FAILURES_IN_A_ROW} trials in a row failed (the last: {message})"

    def _mark_pruned(self, trial: Any, work_dir: Path, step: int, value: float, train_iter: int) -> None:
        """Say in the trial's own log and TensorBoard that it was pruned, and add its HParams row."""
        import runpy

        from rlearn.config import flatten
        from rlearn.writers.tensorboard import TensorBoardWriter

        exp_name = self.cfg["exp_name"]
        message = (f"pruned by rlearn tune: trial {trial.number} of study {self.study_name!r}, evaluation return "
                   f"{value:.4g} at envstep {step} (the pruner stopped it; the run saved a checkpoint)")
        stamp = time.strftime("%m/%d %H:%M:%S")
        for log in (work_dir / f"{exp_name}.log", work_dir / CONSOLE_LOG):
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"{stamp} - {exp_name} - WARNING - {message}\n")
        cfg = runpy.run_path(str(work_dir / EXPERIMENT_CONFIG))["config"]
        writer = TensorBoardWriter(work_dir / "tb")
        try:
            writer.write_text("tune/pruned", message, train_iter)
            writer.write_hparams(flatten(cfg), {"evaluator/episode_return_mean": value}, train_iter)
        finally:
            writer.close()

    # ----------------------------------------------------------------------------- the study
    def _worker(self, orphans: List[Any], stop: StopSignals, display: ExperimentDisplay) -> None:
        while True:
            picked = self._next(orphans, stop)
            if picked is None:
                return
            self._run_trial(*picked, stop, display)

    def run(self, display_enabled: Optional[bool] = None) -> TuneResult:
        """Run trials until the study has ``trials`` of them (see the module doc)."""
        orphans = self._orphans()
        with StopSignals() as stop, ExperimentDisplay(self.trials, f"tune {self.study_name}", unit="trial",
                                                      enabled=display_enabled) as display:
            display.note(f"study {self.study_name!r} in {self.storage_url}: {self._counted()} of {self.trials} trials "
                         f"so far, {len(orphans)} to resume; {self.jobs} at a time")
            workers = [threading.Thread(target=self._worker, args=(orphans, stop, display), daemon=True)
                       for _ in range(self.jobs)]
            for worker in workers:
                worker.start()
            while any(w.is_alive() for w in workers):
                for worker in workers:
                    worker.join(timeout=0.5)
                counts = self._counts()
                display.update(counts.get("complete", 0) + counts.get("pruned", 0), self._status())
        best_config = self.write_best_config()
        code = 128 + stop.received[0] if stop.requested else 1 if self.aborted else 0
        top = self._best()
        return TuneResult(self.exp_dir, self._counts(), top.number if top else None, top.value if top else None,
                          dict(top.params) if top else {}, best_config, code, self.study_name, self.storage_url)

    def _counts(self) -> Dict[str, int]:
        return dict(Counter(t.state.name.lower() for t in self.study.get_trials(deepcopy=False)))

    def _best(self) -> Optional[Any]:
        """The complete trial with the highest value; None before any completed."""
        complete = [t for t in self.study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
        return max(complete, key=lambda t: t.value, default=None)

    def _status(self) -> str:
        best = self._best()
        return (f"best {best.value:.4g} (trial {best.number}), " if best else "") + f"{len(self._running)} running"

    def write_best_config(self) -> Optional[Path]:
        """``best_config.py``: the base config with the best complete trial's overrides (not its thread cap);
        None before any trial completed."""
        best = self._best()
        if best is None:
            return None
        cfg = self._trial_config(best.user_attrs.get("overrides", []))
        return dump_experiment_config(cfg, self.exp_dir / BEST_CONFIG)


def _last_evaluation(work_dir: Path) -> Optional[float]:
    from rlearn.hooks.eval_state import read_evaluations

    path = work_dir / "evaluations.jsonl"
    rows = read_evaluations(path) if path.is_file() else []
    return mean_return(rows[-1]) if rows else None
