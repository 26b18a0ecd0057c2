"""The off-policy loop (TD3...): each step collects ``train.collect_steps`` steps per environment into the replay
buffer; past ``policy.learning_starts`` steps (as in SB3) every env step earns ``train.updates_per_step`` learner
iterations (:class:`UpdateSchedule`), each on ``buffer.sample(policy.batch_size)``."""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping

from rlearn.values import check_int, is_real
from rlearn.run.loop import Loop
from rlearn.trace import span

__all__ = ["OffPolicyLoop", "UpdateSchedule"]


class UpdateSchedule:
    """Learner iterations earned by collected env steps, ``updates_per_step`` each (0.5: one every 2 steps):
    ``credit`` is the fraction of an iteration earned, ``pending`` the iterations earned and not run yet (a
    resumed run runs them before collecting again)."""

    KEYS = ("update_credit", "pending_updates")

    def __init__(self, updates_per_step: float) -> None:
        self.updates_per_step = float(updates_per_step)
        self.credit = 0.0
        self.pending = 0

    def earn(self, new_steps: int) -> int:
        """Credit ``new_steps`` collected env steps; the whole iterations earned go to :attr:`pending`."""
        self.credit += self.updates_per_step * new_steps
        earned = int(math.floor(self.credit + 1e-9))
        self.credit = max(0.0, self.credit - earned)
        self.pending += earned
        return earned

    def state_dict(self) -> Dict[str, Any]:
        return {"update_credit": self.credit, "pending_updates": self.pending}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; a value of the wrong type is a ValueError naming its key."""
        credit, pending = state["update_credit"], state["pending_updates"]
        if not is_real(credit) or not 0 <= credit < 1 + 1e-6:
            raise ValueError(f"'update_credit' must be a number in [0, 1), got {credit!r}")
        self.pending = check_int("'pending_updates'", pending, 0)
        self.credit = float(credit)


class OffPolicyLoop(Loop):
    """Collect, add to the replay buffer, run the earned iterations."""

    def __init__(self, learner: Any, collector: Any, buffer: Any, world_size: int, *, max_env_steps: int,
                 collect_steps: int, learning_starts: int, batch_size: int, schedule: UpdateSchedule) -> None:
        super().__init__(learner, collector, world_size, max_env_steps)
        self.buffer = buffer
        self.collect_steps = collect_steps
        self.learning_starts = learning_starts
        self.batch_size = batch_size
        self.schedule = schedule
        self._prefetch = getattr(buffer, "prefetch", None)

    def finished(self) -> bool:
        return super().finished() and self.schedule.pending == 0

    def between_steps(self) -> bool:
        return self.schedule.pending == 0

    def step(self, guard: Any) -> bool:
        if self.schedule.pending == 0:  # else: a resumed checkpoint taken between two iterations
            before = self.collector.envstep
            result = self.collect(self.collect_steps)
            self.buffer.add(result.transitions)
            # learning_starts and updates_per_step count this rank's own steps: each rank samples its own buffer
            if self.collector.envstep > self.learning_starts:
                self.schedule.earn(self.collector.envstep - before)
        schedule, buffer, learner = self.schedule, self.buffer, self.learner
        if schedule.pending > 1 and self._prefetch is not None:
            self._prefetch(self.batch_size, schedule.pending)  # the same batches, drawn and gathered in chunks
        envstep = self.envstep
        while schedule.pending > 0:
            schedule.pending -= 1  # before train(): a checkpoint in after_iter must not count it again
            with span("learner/data", lane="learner"):
                batch = buffer.sample(self.batch_size)
            learner.train(batch, envstep=envstep)
            if guard.requested:
                return True
        return False
