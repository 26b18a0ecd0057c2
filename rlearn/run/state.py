"""``RunState``: the run's own counters, saved in every checkpoint under ``states["run"]``."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from rlearn.hooks.eval import EvalState
from rlearn.run.off_policy import UpdateSchedule

__all__ = ["RunState", "STATE_NAME", "world_size_mismatch"]

#: the name of the run's entry in a checkpoint's ``states``
STATE_NAME = "run"


class RunState:
    """The :class:`EvalState`, the off-policy :class:`UpdateSchedule` and the number of processes (a
    checkpoint resumes only with the same number)."""

    def __init__(self, world_size: int = 1, eval_state: Optional[EvalState] = None,
                 updates: Optional[UpdateSchedule] = None) -> None:
        self.world_size = world_size
        self.eval = eval_state if eval_state is not None else EvalState()
        self.updates = updates if updates is not None else UpdateSchedule(1.0)

    def state_dict(self) -> Dict[str, Any]:
        return {**self.eval.state_dict(), **self.updates.state_dict(), "world_size": self.world_size}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; wrong keys or another number of processes is a ``ValueError``."""
        expected = set(EvalState.KEYS) | set(UpdateSchedule.KEYS) | {"world_size"}
        if not isinstance(state, Mapping) or set(state) != expected:
            keys = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"run state: expected keys {sorted(expected)}, got {keys}")
        saved_world = int(state["world_size"])
        if saved_world != self.world_size:
            raise ValueError(world_size_mismatch(saved_world, self.world_size))
        self.eval.load_state_dict({key: state[key] for key in EvalState.KEYS})
        self.updates.load_state_dict({key: state[key] for key in UpdateSchedule.KEYS})


def world_size_mismatch(saved: int, current: int) -> str:
    """Why a checkpoint of ``saved`` processes does not resume in ``current`` ones, and how to resume it."""
    how = f"--nproc {saved}" if saved > 1 else "one process (without --nproc)"
    return f"written by a run of {saved} process(es), this run has {current}; resume it with {how}"
