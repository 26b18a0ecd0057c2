"""The on-policy loop (PPG, REINFORCE...): one rollout, one learner iteration.

Each step collects ``policy.rollout_steps`` steps per environment and calls ``learner.train`` once on the
``[T, N, ...]`` rollout tensors (:func:`rlearn.buffer.rollout_to_tensors`).
"""

from __future__ import annotations

from typing import Any

from rlearn.run.loop import Loop
from rlearn.trace import span

__all__ = ["OnPolicyLoop"]


class OnPolicyLoop(Loop):
    """Collect a rollout, train on it (see the module docstring)."""

    def __init__(self, learner: Any, collector: Any, world_size: int, *, max_env_steps: int, rollout_steps: int,
                 device: Any) -> None:
        super().__init__(learner, collector, world_size, max_env_steps)
        self.rollout_steps = rollout_steps
        self.device = device

    def step(self, guard: Any) -> bool:
        from rlearn.buffer import rollout_to_tensors

        result = self.collect(self.rollout_steps)
        with span("learner/data", lane="learner"):
            data = rollout_to_tensors(result, device=self.device)
        self.learner.train(data, envstep=self.envstep)
        return False
