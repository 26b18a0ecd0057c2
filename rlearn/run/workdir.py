"""Choosing the work directory (never one holding a run, unless resuming: the default moves on to
``<exp_name>_2``...; rank 0 locks it for the whole run) and the checkpoint to resume from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Tuple, Union

from rlearn.checkpoint import find_resume_checkpoint
from rlearn.config import ConfigError, default_work_dir
from rlearn.workdir_lock import WorkDirError, WorkDirLock, claim_free_work_dir, existing_run

__all__ = ["WorkDir", "check_directory", "check_not_in_use", "choose_work_dir", "latest_run_dir", "resume_checkpoint"]

ResumeArg = Union[bool, str, Path, None]


def latest_run_dir(default: Path) -> Path:
    """The run among ``default``, ``<default>_2``... whose newest checkpoint was written last (ties: the higher
    suffix), which ``--resume`` without ``--work-dir`` continues; ``default`` when none holds a checkpoint."""
    candidates = [default]
    if default.parent.is_dir():
        prefix = f"{default.name}_"
        numbered = [p for p in default.parent.iterdir()
                    if p.name.startswith(prefix) and p.name[len(prefix):].isdigit() and p.is_dir()]
        candidates += sorted(numbered, key=lambda p: int(p.name[len(prefix):]))
    newest = [(max(times), rank, candidate) for rank, candidate in enumerate(candidates)
              if (times := [p.stat().st_mtime_ns for p in (candidate / "ckpt").glob("*.pt") if p.is_file()])]
    return max(newest)[2] if newest else default


@dataclass
class WorkDir:
    """The chosen work directory and its files; ``moved_from``: the default directory when it held a run;
    ``lock``: rank 0's lock; ``resume_skipped``: checkpoints ``--resume`` passed over, with the reason."""

    path: Path
    moved_from: Optional[Path] = None
    lock: Optional[WorkDirLock] = None
    resume_skipped: List[Tuple[Path, str]] = field(default_factory=list)

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    @property
    def tb_dir(self) -> Path:
        return self.path / "tb"

    @property
    def ckpt_dir(self) -> Path:
        return self.path / "ckpt"

    @property
    def config_file(self) -> Path:
        return self.path / "config.py"


def choose_work_dir(
    cfg: Mapping[str, Any],
    work_dir: Union[str, Path, None],
    resume: ResumeArg,
    rank: int = 0,
    broadcast: Callable[[Any], Any] = lambda obj: obj,
) -> WorkDir:
    """The work directory: ``work_dir`` as given; else, resuming, :func:`latest_run_dir`, or for a fresh run the
    first free ``work_dirs/<exp_name>``, ``_2``... Rank 0 chooses, ``broadcast`` hands its choice to the others."""
    if work_dir is not None and not str(work_dir).strip():  # Path("") is the current directory
        raise ConfigError(f"--work-dir is empty ({str(work_dir)!r}): name a directory, or leave --work-dir out "
                          "for work_dirs/<exp_name>")
    default = default_work_dir(cfg)
    if work_dir is not None or (resume is not None and resume is not False):  # resuming: the most recent run
        path = Path(work_dir) if work_dir is not None else broadcast(latest_run_dir(default) if rank == 0 else None)
        path = check_directory(path)
        return WorkDir(path, lock=_lock(path) if rank == 0 else None)
    lock = None
    if rank == 0:
        check_directory(default)
        try:
            path, lock = claim_free_work_dir(default)
        except WorkDirError as exc:
            raise ConfigError(str(exc)) from exc
    path = broadcast(path if rank == 0 else None)
    return WorkDir(check_directory(path), moved_from=default if path != default else None, lock=lock)


def _lock(path: Path) -> WorkDirLock:
    """Rank 0's lock on an explicit (or resumed) work dir; a live run holding it is a one-line ConfigError."""
    try:
        return WorkDirLock(path).acquire()
    except WorkDirError as exc:  # a busy work dir's message already says what to do
        raise ConfigError(str(exc)) from exc


def check_not_in_use(path: Path) -> None:
    """A one-line ConfigError when a live run holds ``path`` (its lock is taken and given back at once)."""
    if path.is_dir():
        _lock(path).release()


def check_directory(path: Path, option: str = "--work-dir", name: str = "work dir",
                    error: Callable[[str], Exception] = ConfigError) -> Path:
    """``path`` if it is a directory or can become one; ``error`` names it (``name``, chosen with ``option``) when
    it or a parent is a file."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            if not candidate.is_dir():
                what = "is" if candidate == path else f"cannot be created: {str(candidate)!r} is"
                raise error(f"{name} {str(path)!r} {what} a file, not a directory; choose another {option}")
            break
    return path


def resume_checkpoint(work_dir: WorkDir, resume: ResumeArg) -> Optional[Path]:
    """The checkpoint to resume from: None for a fresh run (refused in a directory holding a run); for ``True``
    ``ckpt/latest.pt``, or the newest valid ``iteration_<n>.pt`` (the skipped ones in ``resume_skipped``)."""
    if resume is None or resume is False:
        existing = existing_run(work_dir.path)
        if existing:
            raise ConfigError(f"work dir {str(work_dir.path)!r} already holds a run ({existing}); continue it with "
                              "--resume, or choose another --work-dir (or delete it)")
        return None
    if resume is not True:
        path = Path(resume)
        if not path.is_file():
            raise ConfigError(f"--resume: no checkpoint at {str(path)!r}")
        return path
    ckpt_dir = work_dir.ckpt_dir
    if not (ckpt_dir / "latest.pt").exists() and not any(ckpt_dir.glob("iteration_*.pt")):
        raise ConfigError(f"--resume: no checkpoint at {str(ckpt_dir / 'latest.pt')!r}")
    path, work_dir.resume_skipped = find_resume_checkpoint(ckpt_dir)
    return path
