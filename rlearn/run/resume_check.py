"""What ``--resume`` checks before anything is built: the number of processes that wrote the checkpoint, and
whether the run is already complete under the config (then nothing changes; the console says how to extend it).
:func:`precheck_launch` checks what every process of ``rlearn train --nproc N`` would refuse, before torchrun."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from rlearn.checkpoint import CheckpointError, read_checkpoint
from rlearn.values import is_int
from rlearn.run.result import MAX_ENV_STEPS, NO_IMPROVEMENT, STOP_VALUE
from rlearn.run.state import STATE_NAME, world_size_mismatch

__all__ = ["CompleteRun", "inspect_resume", "precheck_launch"]


@dataclass
class CompleteRun:
    """A checkpoint of a run with nothing left to do under the config: the stop ``reason``, ``why`` (what was
    reached), ``extend`` (the ``--set`` overrides that give it work again), ``work_dir`` (:func:`precheck_launch`)."""

    reason: str
    checkpoint: Path
    train_iter: int
    envstep: int
    why: str
    extend: List[str]
    last_eval: Optional[Dict[str, Any]] = None
    world_size: int = 1
    work_dir: Optional[Path] = None

    def report(self, exp_name: str, work_dir: Path) -> None:
        """Say on the console (not in the run's log) that the run is complete and the command that extends it."""
        from rlearn.executables import shell_command
        from rlearn.logging import get_logger

        nproc = ["--nproc", str(self.world_size)] if self.world_size > 1 else []
        command = shell_command("rlearn", "train", work_dir / "config.py", "--work-dir", work_dir, "--resume",
                                *nproc, "--set", *self.extend)
        goal = "train longer" if self.reason == MAX_ENV_STEPS else "train on"
        console = get_logger(name=exp_name)
        console.info(f"{exp_name}: the run in {work_dir} is complete: train_iter {self.train_iter}, envstep "
                     f"{self.envstep} ({self.checkpoint}) {self.why}; --resume changed nothing")
        console.info(f"  to {goal}: {command}")


def _complete(checkpoint: Mapping[str, Any], state: Mapping[str, Any],
              cfg: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """``reason``, ``why`` and ``extend`` when ``checkpoint`` has nothing left to do under ``cfg``."""
    envstep, limit = int(checkpoint["envstep"]), cfg["train"]["max_env_steps"]
    if envstep >= limit:
        return dict(reason=MAX_ENV_STEPS, why=f"reached train.max_env_steps={limit}",
                    extend=[f"train.max_env_steps={max(2 * limit, envstep + limit)}"])
    last = state.get("last_eval")
    stop_value = cfg["eval"]["stop_value"]
    if (stop_value is not None and isinstance(last, Mapping) and state.get("last_eval_envstep") == envstep
            and last.get("episode_return_mean", float("-inf")) >= stop_value):
        return dict(reason=STOP_VALUE, extend=["eval.stop_value=null"],
                    why=f"reached eval.stop_value={stop_value:g} (its last evaluation returned "
                        f"{last['episode_return_mean']:.4g})")
    progress = checkpoint.get("eval_progress") or {}
    patience, since = cfg["eval"]["patience"], progress.get("evals_since_best", 0)
    if patience is not None and isinstance(since, int) and since >= patience:
        return dict(reason=NO_IMPROVEMENT, extend=["eval.patience=null"],
                    why=f"used up eval.patience={patience} ({since} evaluations without a new best)")
    return None


def inspect_resume(path: Union[str, Path], cfg: Mapping[str, Any], world_size: int) -> Optional[CompleteRun]:
    """A :class:`CompleteRun` when checkpoint ``path`` has nothing left to do under ``cfg``, else None (resume it);
    a :class:`CheckpointError` when another number of processes than ``world_size`` wrote it."""
    path = Path(path)
    checkpoint = read_checkpoint(path)
    state = checkpoint.get("states", {}).get(STATE_NAME)
    state = state if isinstance(state, Mapping) else {}
    saved_world = state.get("world_size")
    if is_int(saved_world) and saved_world != world_size:
        raise CheckpointError(f"checkpoint {path}: {world_size_mismatch(saved_world, world_size)}")
    found = _complete(checkpoint, state, cfg)
    if found is None:
        return None
    last = state.get("last_eval")
    return CompleteRun(checkpoint=path, train_iter=int(checkpoint["train_iter"]), envstep=int(checkpoint["envstep"]),
                       last_eval=dict(last) if isinstance(last, Mapping) else None, world_size=world_size, **found)


def precheck_launch(cfg: Mapping[str, Any], work_dir: Union[str, Path, None], resume: Any,
                    world_size: int) -> Optional[CompleteRun]:
    """Check once, before ``rlearn train --nproc N`` starts them, what every process would refuse (seed, device,
    work dir, checkpoint: the same one-line errors); the :class:`CompleteRun` to report instead, or None."""
    from rlearn.config import default_work_dir
    from rlearn.run.build import resolve_device
    from rlearn.run.ranks import check_seed
    from rlearn.run.workdir import WorkDir, check_directory, check_not_in_use, latest_run_dir, resume_checkpoint

    check_seed(cfg["seed"], world_size)
    resolve_device(cfg["device"])
    resuming = resume is not None and resume is not False
    if work_dir is None and not resuming:
        return None
    path = check_directory(Path(work_dir) if work_dir is not None else latest_run_dir(default_work_dir(cfg)))
    check_not_in_use(path)
    checkpoint = resume_checkpoint(WorkDir(path), resume)
    complete = None if checkpoint is None else inspect_resume(checkpoint, cfg, world_size)
    if complete is not None:
        complete.work_dir = path
    return complete
