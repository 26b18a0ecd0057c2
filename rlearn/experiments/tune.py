"""``rlearn tune``: an Optuna study whose trials are ordinary ``rlearn train`` runs (docs/experiments.md).

A worker thread per job runs one trial at a time in its own process (work dir ``trial_<n>/``), reports its
evaluations' mean returns on a fixed env-step grid (the base config's ``eval.freq``) and stops it when the
pruner says so. A finished trial's objective is its last evaluation's mean return (maximised). Several tuners
may work on one study (:mod:`rlearn.experiments.study`); a dir belongs to one study (:mod:`.tune_setup`).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import optuna
from optuna.trial import TrialState

from rlearn.experiments.child import (
    CONSOLE_LOG, EXPERIMENT_CONFIG, INTERRUPTED_CODES, ExperimentError, StopSignals, TrainProcess, check_numbers,
    check_out, dump_experiment_config, last_return, load_experiment_config, mean_return, start_run, thread_settings,
)
from rlearn.experiments.display import ExperimentDisplay
from rlearn.experiments.study import (
    COUNTED_STATES, HEARTBEAT_ATTR, WORKER_ATTR, DirLock, is_surplus, open_storage, requeue, retry_abandoned,
    storage_error, storage_label, worker_identity,
)
from rlearn.experiments.tune_setup import (
    TUNE_FILE, check_identity, create_study, load_space, made_by, open_tune_dir, override_text, sampled_overrides,
)

__all__ = ["Tuner", "TuneResult", "load_space", "override_text", "TUNE_FILE", "BEST_CONFIG"]

BEST_CONFIG = "best_config.py"
#: consecutive failed trials after which the study stops (a broken space or config fails every trial)
MAX_FAILURES_IN_A_ROW = 3
#: a running trial whose heartbeat is older than this many heartbeat intervals is taken over by another worker
GRACE_BEATS = 6


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
        trials: complete + pruned (+ running or queued) trials the study should reach, counting every worker's.
        exp_dir: the experiment dir (default ``experiments/<exp_name>_tune``).
        storage: an Optuna RDB URL or a journal file path (default: the journal file ``<exp_dir>/study.journal``).
        jobs: trials at once in this process.
        study_name: default: the config's ``exp_name``.
        startup_trials, warmup_steps: the default ``MedianPruner``'s ``n_startup_trials`` and
            ``n_warmup_steps`` (env steps; default: the policy's ``learning_starts`` plus one pruning step).
        sampler_seed: seed of the default ``TPESampler`` (a continued study seeds it with ``sampler_seed +
            trials so far``, so it does not repeat the first trials' parameters).
        heartbeat_s: how often a running trial's heartbeat is renewed; a trial without one for
            ``GRACE_BEATS`` times as long is retried by another worker.
    """

    def __init__(self, config: str, space_file: Path, trials: int, exp_dir: Optional[Path] = None,
                 storage: Optional[str] = None, jobs: int = 1, overrides: Sequence[str] = (),
                 study_name: Optional[str] = None, startup_trials: int = 5, warmup_steps: Optional[int] = None,
                 sampler_seed: Optional[int] = None, heartbeat_s: float = 10.0) -> None:
        check_numbers(trials=trials, jobs=jobs, startup_trials=startup_trials, warmup_steps=warmup_steps,
                      sampler_seed=sampler_seed, heartbeat=heartbeat_s)
        self.trials, self.jobs = trials, jobs
        self.heartbeat_s, self.grace_s = float(heartbeat_s), GRACE_BEATS * float(heartbeat_s)
        self.space = load_space(Path(space_file))
        self.cfg = load_experiment_config(config, overrides)
        self.exp_dir = Path(exp_dir) if exp_dir is not None else Path("experiments") / f"{self.cfg['exp_name']}_tune"
        self.budget = int(self.cfg["train"]["max_env_steps"])
        self.grid = int(self.cfg["eval"].get("freq") or self.budget)
        self.learning_starts = int(self.cfg.get("policy", {}).get("learning_starts", 0) or 0)
        self.warmup_steps = self.learning_starts + self.grid if warmup_steps is None else warmup_steps
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        pruner = (made_by(self.space, "pruner", optuna.pruners.BasePruner) if self.space.pruner else
                  optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=self.warmup_steps))
        sampler = (made_by(self.space, "sampler", optuna.samplers.BaseSampler) if self.space.sampler else
                   optuna.samplers.TPESampler(seed=sampler_seed))
        self.notes: List[str] = []  # what to tell the user when the study runs
        check_out(self.exp_dir)
        created = not self.exp_dir.exists()
        try:
            self.exp_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ExperimentError(f"--out {str(self.exp_dir)!r}: cannot be created ({exc.strerror})") from exc
        self._dir_lock = DirLock(self.exp_dir)
        with self._dir_lock:
            try:
                state = open_tune_dir(self.exp_dir, self.cfg, config, overrides, storage, study_name, space_file,
                                      self.notes)
                self.storage_label = storage_label(state["storage"], self.exp_dir)
                self.study = create_study(open_storage(state["storage"], self.exp_dir), state["study_name"],
                                          self.storage_label, sampler, pruner)
                check_identity(self.exp_dir, self.study, self.storage_label, state)
            except ExperimentError:
                if created:  # leave nothing behind: the same command with a working --storage starts afresh
                    shutil.rmtree(self.exp_dir, ignore_errors=True)
                raise
        self.storage_url, self.study_name = state["storage"] or self.storage_label, state["study_name"]
        asked = len(self.study.get_trials(deepcopy=False))
        if sampler_seed is not None and asked and not self.space.sampler:
            # a seeded sampler started again would draw the first trials' parameters again: go on from the
            # number of trials the study has (a different stream for each restart)
            self.study.sampler = optuna.samplers.TPESampler(seed=sampler_seed + asked)
        self.thread_overrides, self.thread_env = thread_settings(self.cfg["num_threads"], jobs)
        self.me = worker_identity()
        self._lock = threading.Lock()
        self._failures_in_a_row = 0
        self.aborted: Optional[str] = None
        self.fatal: Optional[str] = None
        self._active: Dict[int, int] = {}  # trial id -> number, of the trials this process runs

    def _trial_config(self, overrides: Sequence[str]) -> Dict[str, Any]:
        return load_experiment_config(str(self.exp_dir / EXPERIMENT_CONFIG), overrides)

    # ----------------------------------------------------------------------------- choosing trials
    def _next(self, stop: StopSignals, display: ExperimentDisplay) -> Optional[Any]:
        """The next trial to run (a queued retry first, else a new one), claimed; None when the study has its
        trials and no other worker's trial may still need taking over."""
        storage = self.study._storage
        while True:
            with self._lock:
                if stop.requested or self.aborted or self.fatal:
                    return None
                with self._dir_lock:
                    for number in retry_abandoned(self.study, self.me, self.grace_s):
                        display.note(f"trial {number}: its worker is gone; queued again (it resumes from its checkpoint)")
                    trials = self.study.get_trials(deepcopy=False)
                    counted = sum(t.state.name in COUNTED_STATES for t in trials)
                    if counted < self.trials or any(t.state == TrialState.WAITING for t in trials):
                        trial = self.study.ask()
                        storage.set_trial_user_attr(trial._trial_id, WORKER_ATTR, self.me)
                        storage.set_trial_user_attr(trial._trial_id, HEARTBEAT_ATTR, time.time())
                        self._active[trial._trial_id] = trial.number
                        frozen = storage.get_trial(trial._trial_id)
                        if "failed_trial" in frozen.system_attrs or not is_surplus(self.study, trial.number, self.trials):
                            return trial
                        self._active.pop(trial._trial_id)  # another worker asked the last one at the same moment
                        storage.set_trial_user_attr(trial._trial_id, "surplus", True)
                        self.study.tell(trial, state=TrialState.FAIL)
                        continue
                    if not any(t.state == TrialState.RUNNING and t._trial_id not in self._active for t in trials):
                        return None
            time.sleep(min(2.0, self.heartbeat_s))  # other workers' trials: wait until they end or are abandoned

    def _beat(self, done: threading.Event) -> None:
        """Renew the heartbeat of this process's running trials every ``heartbeat_s``."""
        while not done.wait(self.heartbeat_s):
            for trial_id in list(self._active):
                try:
                    self.study._storage.set_trial_user_attr(trial_id, HEARTBEAT_ATTR, time.time())
                except Exception:  # noqa: BLE001 - finished meanwhile, or the storage is away for a moment
                    pass

    # ----------------------------------------------------------------------------- one trial
    def _run_trial(self, trial: Any, stop: StopSignals, display: ExperimentDisplay) -> None:
        frozen = self.study._storage.get_trial(trial._trial_id)
        retry_of = frozen.system_attrs.get("failed_trial")
        if retry_of is None:
            work_dir = self.exp_dir / f"trial_{trial.number}"
            if work_dir.exists() and any(work_dir.iterdir()):
                raise ExperimentError(f"{work_dir} already holds a run that is not trial {trial.number} of study "
                                      f"{self.study_name!r} in {self.storage_label}; choose another --out")
            overrides = sampled_overrides(self.space, trial)
            self._trial_config(overrides)  # a sampled value the config refuses: ExperimentError naming it
            for key, value in (("work_dir", str(work_dir.resolve())), ("host", self.me["host"]),
                               ("overrides", overrides)):
                trial.set_user_attr(key, value)
            display.note(f"trial {trial.number}: {' '.join(overrides)} -> {work_dir}")
        else:
            work_dir = self.exp_dir / Path(frozen.user_attrs.get("work_dir", f"trial_{retry_of}")).name
            overrides = list(frozen.user_attrs.get("overrides", []))
            display.note(f"trial {trial.number}: trial {retry_of} again, in {work_dir}")
        process = start_run(self.exp_dir, work_dir, ["--set", *overrides, *self.thread_overrides], self.thread_env,
                            display.note, f"trial {trial.number}")
        if process is None:
            self._requeue(trial)
            return
        pruned_at, code = self._follow(trial, process, stop)
        if pruned_at is not None:
            self._mark_pruned(trial, work_dir, *pruned_at)
            self.study.tell(trial, state=TrialState.PRUNED)
            display.note(f"trial {trial.number}: pruned at envstep {pruned_at[0]} (evaluation return {pruned_at[1]:.4g})")
        elif code == 0:
            final = last_return(work_dir)
            if final is None:
                return self._fail(trial, f"trial {trial.number}: finished without an evaluation", display)
            self.study.tell(trial, final)
            self._failures_in_a_row = 0
            display.note(f"trial {trial.number}: finished, last evaluation return {final:.4g}")
        elif code in INTERRUPTED_CODES and (stop.requested or self.fatal):
            self._requeue(trial)
            display.note(f"trial {trial.number}: stopped (checkpoint saved); the next `rlearn tune` resumes it")
            return
        else:
            return self._fail(trial, f"trial {trial.number}: rlearn train exited with {code}: {process.last_error()} "
                                     f"(see {work_dir / CONSOLE_LOG})", display)
        self._active.pop(trial._trial_id, None)

    def _follow(self, trial: Any, process: TrainProcess, stop: StopSignals) -> Tuple[Optional[Tuple[int, float, int]], int]:
        """Report the run's evaluations on the pruning grid until it ends; (where it was pruned, exit code)."""
        reported: Dict[int, float] = {}
        pruned_at = None
        forwarded, told_to_stop = 0, False
        while True:
            ended = process.poll() is not None
            forwarded = stop.forward([process], forwarded)  # Ctrl-C / SIGTERM of the tuner: checkpoint and stop
            if self.fatal and not forwarded and not told_to_stop and pruned_at is None:
                process.send_signal(15)  # another worker hit a mistake: this run saves a checkpoint and is queued again
                told_to_stop = True
            for row in process.evaluations.new_rows():
                envstep, value = int(row["envstep"]), mean_return(row)
                step = envstep // self.grid * self.grid  # the grid: the same steps whatever n_envs or chunking
                if value is None or step <= 0 or step in reported or pruned_at is not None:
                    continue
                trial.report(value, step)
                reported[step] = value
                if envstep < self.budget and trial.should_prune():  # the final evaluation: nothing left to save
                    pruned_at = (envstep, value, int(row.get("train_iter", 0)))
                    process.send_signal(15)  # SIGTERM: the run saves a checkpoint and stops
            if ended:
                return pruned_at, process.wait()
            time.sleep(0.5)

    def _requeue(self, trial: Any) -> None:
        """Fail ``trial`` and queue a copy that resumes its work dir (a stopped trial is never left RUNNING)."""
        self._active.pop(trial._trial_id, None)
        requeue(self.study, self.study._storage.get_trial(trial._trial_id))

    def _fail(self, trial: Any, message: str, display: ExperimentDisplay) -> None:
        self._active.pop(trial._trial_id, None)
        trial.set_user_attr("error", message)
        self.study.tell(trial, state=TrialState.FAIL)
        display.note(message)
        with self._lock:
            self._failures_in_a_row += 1
            if self._failures_in_a_row >= MAX_FAILURES_IN_A_ROW and not self.aborted:
                self.aborted = f"{MAX_FAILURES_IN_A_ROW} trials in a row failed (the last: {message})"

    def _mark_pruned(self, trial: Any, work_dir: Path, step: int, value: float, train_iter: int) -> None:
        """Say in the trial's own log and TensorBoard that it was pruned, and add its HParams row. The run's
        own "resume with: ... --resume" hint is taken out: a pruned trial is finished for its study."""
        import runpy
        from contextlib import closing

        from rlearn.config import flatten
        from rlearn.writers.tensorboard import TensorBoardWriter

        exp_name = self.cfg["exp_name"]
        message = (f"pruned by rlearn tune: trial {trial.number} of study {self.study_name!r}, evaluation return "
                   f"{value:.4g} at envstep {step} (the pruner stopped it; it is not to be resumed)")
        stamp = time.strftime("%m/%d %H:%M:%S")
        for log in (work_dir / f"{exp_name}.log", work_dir / CONSOLE_LOG):
            _drop_resume_hint(log)
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"{stamp} - {exp_name} - WARNING - {message}\n")
        cfg = runpy.run_path(str(work_dir / EXPERIMENT_CONFIG))["config"]
        with closing(TensorBoardWriter(work_dir / "tb")) as writer:
            writer.write_text("tune/pruned", message, train_iter)
            writer.write_hparams(flatten(cfg), {"evaluator/episode_return_mean": value}, train_iter)

    # ----------------------------------------------------------------------------- the study
    def _worker(self, stop: StopSignals, display: ExperimentDisplay) -> None:
        """Run trials until there are none to run; a mistake (space, config, storage) stops the study, its
        trial failed."""
        trial = None
        try:
            while True:
                trial = self._next(stop, display)
                if trial is None:
                    return
                self._run_trial(trial, stop, display)
                trial = None
        except Exception as exc:  # noqa: BLE001 - else the storage failed: one line, no thread traceback
            message = (str(exc) if isinstance(exc, ExperimentError)
                       else f"{self.storage_label}: {storage_error(exc, self.storage_label)}")
            with self._lock:
                self.fatal = self.fatal or message
            if trial is not None and self._active.pop(trial._trial_id, None) is not None:
                try:
                    trial.set_user_attr("error", message)
                    self.study.tell(trial, state=TrialState.FAIL)
                except Exception:  # noqa: BLE001 - the storage failed; its heartbeat ends, another worker retries it
                    pass

    def run(self, display_enabled: Optional[bool] = None) -> TuneResult:
        """Run trials until the study has ``trials`` of them (see the module doc)."""
        beating = threading.Event()
        with StopSignals() as stop, ExperimentDisplay(self.trials, f"tune {self.study_name}", unit="trial",
                                                      enabled=display_enabled) as display:
            for note in self.notes:
                display.note(note)
            counts = self._counts()
            counted = sum(counts.get(state.lower(), 0) for state in COUNTED_STATES)
            display.note(f"study {self.study_name!r} in {self.storage_label}: {counted} of {self.trials} trials so "
                         f"far, {counts.get('waiting', 0)} queued; {self.jobs} at a time; pruning from envstep "
                         f"{self.warmup_steps} on a grid of {self.grid} env steps")
            threading.Thread(target=self._beat, args=(beating,), daemon=True).start()
            workers = [threading.Thread(target=self._worker, args=(stop, display), daemon=True) for _ in range(self.jobs)]
            for worker in workers:
                worker.start()
            while any(w.is_alive() for w in workers):
                for worker in workers:
                    worker.join(timeout=0.5)
                try:
                    counts, best = self._counts(), self._best()
                except Exception:  # noqa: BLE001 - a storage error: the workers report it
                    continue
                display.update(counts.get("complete", 0) + counts.get("pruned", 0),
                               (f"best {best.value:.4g} (trial {best.number}), " if best else "")
                               + f"{len(self._active)} running here")
            beating.set()
        best_config, top = None, None
        if not self.fatal:
            try:
                best_config, top, counts = self.write_best_config(), self._best(), self._counts()
            except Exception as exc:  # noqa: BLE001
                self.fatal = f"{self.storage_label}: {storage_error(exc, self.storage_label)}"
        code = 2 if self.fatal else 128 + stop.received[0] if stop.requested else 1 if self.aborted else 0
        return TuneResult(self.exp_dir, counts, top.number if top else None, top.value if top else None,
                          dict(top.params) if top else {}, best_config, code, self.study_name, self.storage_label)

    def _counts(self) -> Dict[str, int]:
        """Trials by state; a failed trial that was queued again counts as ``retried``, a surplus one not at all."""
        trials = self.study.get_trials(deepcopy=False)
        retried = {n for t in trials for n in t.system_attrs.get("retry_history", [])}
        counts: Counter = Counter()
        for t in trials:
            state = t.state.name.lower()
            if state == "fail" and t.user_attrs.get("surplus"):
                continue
            counts["retried" if state == "fail" and t.number in retried else state] += 1
        return dict(counts)

    def _best(self) -> Optional[Any]:
        """The complete trial with the highest value; None before any completed."""
        complete = [t for t in self.study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
        return max(complete, key=lambda t: t.value, default=None)

    def write_best_config(self) -> Optional[Path]:
        """``best_config.py``: the base config with the best complete trial's overrides (not its thread cap);
        None before any trial completed."""
        best = self._best()
        if best is None:
            return None
        cfg = self._trial_config(best.user_attrs.get("overrides", []))
        return dump_experiment_config(cfg, self.exp_dir / BEST_CONFIG)


def _drop_resume_hint(log: Path) -> None:
    """Remove the "resume with:" line a stopped run writes at its end."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return
    kept = [line for line in lines[-20:] if "resume with: " not in line]
    if len(kept) != len(lines[-20:]):
        from rlearn.fileio import atomic_write_bytes

        atomic_write_bytes(log, "".join(lines[:-20] + kept).encode("utf-8"))
