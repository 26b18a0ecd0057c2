"""Where a run writes: choosing the work directory and the checkpoint to resume from.

A fresh run never writes into a directory that already holds a run (checkpoints or TensorBoard events):
the default ``work_dirs/<exp_name>`` moves on to ``<exp_name>_2``, ``_3``...; an explicit ``--work-dir``
that holds one is refused unless resuming. This module is the place for anything that guards the
directory (a lock against concurrent runs, the choice of a fallback checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from rlearn.config import ConfigError, default_work_dir

__all__ = ["WorkDir", "choose_work_dir", "free_work_dir", "latest_run_dir", "resume_checkpoint", "run_exists"]

ResumeArg = Union[bool, str, Path, None]


def run_exists(work_dir: Path) -> Optional[str]:
    """Why ``work_dir`` holds a run (``"<dir>/ckpt holds checkpoints"``...), or None if it does not."""
    ckpt = work_dir / "ckpt"
    if ckpt.is_dir() and any(ckpt.glob("*.pt")):
        return f"{ckpt} holds checkpoints"
    tb = work_dir / "tb"
    if tb.is_dir() and any("tfevents" in p.name for p in tb.rglob("*")):
        return f"{tb} holds TensorBoard events"
    return None


def free_work_dir(default: Path) -> Path:
    """``default`` if it holds no run yet, else the first of ``<default>_2``, ``<default>_3``... that does not."""
    candidate, n = default, 1
    while run_exists(candidate):
        n += 1
        candidate = default.with_name(f"{default.name}_{n}")
    return candidate


def latest_run_dir(default: Path) -> Path:
    """The most recent run among ``default``, ``<default>_2``, ``<default>_3``... (what ``--resume``
    without ``--work-dir`` continues): the one whose newest checkpoint file was written last (ties: the
    higher suffix). ``default`` itself when none holds a checkpoint (the resume then reports it)."""
    candidates = [default]
    if default.parent.is_dir():
        prefix = f"{default.name}_"
        numbered = [p for p in default.parent.iterdir()
                    if p.name.startswith(prefix) and p.name[len(prefix):].isdigit() and p.is_dir()]
        candidates += sorted(numbered, key=lambda p: int(p.name[len(prefix):]))
    best, best_key = default, None
    for rank, candidate in enumerate(candidates):
        ckpt = candidate / "ckpt"
        times = [p.stat().st_mtime_ns for p in ckpt.glob("*.pt") if p.is_file()] if ckpt.is_dir() else []
        if times and (best_key is None or (max(times), rank) > best_key):
            best, best_key = candidate, (max(times), rank)
    return best


@dataclass
class WorkDir:
    """The chosen work directory and where each file of the run goes.

    Attributes:
        path: the work directory.
        moved_from: the default directory, when it already held a run and ``path`` is the next free one.
    """

    path: Path
    moved_from: Optional[Path] = None

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
    """The work directory of a run.

    An explicit ``work_dir`` is used as given; a resumed run without one continues the most recent run of
    ``work_dirs/<exp_name>``, ``<exp_name>_2``... (:func:`latest_run_dir`); a fresh run takes the first free one of ``work_dirs/<exp_name>``,
    ``<exp_name>_2``... Rank 0 chooses and ``broadcast`` (``rlearn.distributed.broadcast_object`` in a run of
    several processes) hands its choice to the other ranks, which must not look after rank 0 may have
    started writing.
    """
    if work_dir is not None:
        return WorkDir(Path(work_dir))
    default = default_work_dir(cfg)
    if resume is not None and resume is not False:
        return WorkDir(broadcast(latest_run_dir(default) if rank == 0 else None))
    path = broadcast(free_work_dir(default) if rank == 0 else None)
    return WorkDir(path, moved_from=default if path != default else None)


def resume_checkpoint(work_dir: WorkDir, resume: ResumeArg) -> Optional[Path]:
    """The checkpoint to resume from (None for a fresh run); a ConfigError names what is wrong.

    A fresh run (``resume`` None or False) refuses a directory that already holds a run; ``resume=True``
    means ``<work_dir>/ckpt/latest.pt``, a path means that file.
    """
    if resume is None or resume is False:
        existing = run_exists(work_dir.path)
        if existing:
            raise ConfigError(
                f"work dir {str(work_dir.path)!r} already holds a run ({existing}); continue it with "
                f"--resume, or choose another --work-dir (or delete it)"
            )
        return None
    path = work_dir.ckpt_dir / "latest.pt" if resume is True else Path(resume)
    if not path.is_file():
        raise ConfigError(f"--resume: no checkpoint at {str(path)!r}")
    return path
