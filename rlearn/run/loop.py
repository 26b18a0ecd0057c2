"""``Loop``: what the off- and on-policy loops share (collecting, the global env-step count), and the on-policy
loop. The :class:`rlearn.run.Trainer` calls :meth:`Loop.step` until :meth:`Loop.finished`."""

from __future__ import annotations

from typing import Any

from rlearn.trace import span

__all__ = ["Loop", "OnPolicyLoop", "EPISODE_KEYS"]

#: monitor keys of ended exploration episodes
EPISODE_KEYS = ("collector/episode_return", "collector/episode_length")


class Loop:
    """Base of the loops: the ``learner`` trains on what ``collector`` collects until ``max_env_steps`` (summed
    over the ``world_size`` processes, which each collect the same number of steps)."""

    def __init__(self, learner: Any, collector: Any, world_size: int, max_env_steps: int) -> None:
        self.learner = learner
        self.collector = collector
        self.world_size = world_size
        self.max_env_steps = max_env_steps

    @property
    def envstep(self) -> int:
        """Env steps collected so far by all ranks (every rank collects the same number per step)."""
        return self.collector.envstep * self.world_size

    def finished(self) -> bool:
        """True when nothing is left to do."""
        return self.envstep >= self.max_env_steps

    def between_steps(self) -> bool:
        """True when no learner iteration of the last collection is left (where an uninterrupted run evaluates)."""
        return True

    def step(self, guard: Any) -> bool:
        """One collection and the learner iterations it pays for; True if Ctrl-C (``guard.requested``)
        stopped it between two iterations."""
        raise NotImplementedError

    def collect(self, n_steps: int) -> Any:
        """Collect ``n_steps`` steps per environment between the collect hooks; record the ended episodes
        (:data:`EPISODE_KEYS`) and the policy's collect-side keys as ``collector/<key>``."""
        learner = self.learner
        learner.call_hook("before_collect")
        result = self.collector.collect(n_steps)
        learner.envstep = self.envstep  # also before learning starts (checkpoints, hooks)
        learner.call_hook("after_collect")
        for episode in result.episodes:  # EPISODE_KEYS are collector/<the episode's key>
            learner.record({key: episode[key.partition("/")[2]] for key in EPISODE_KEYS})
        if result.metrics:  # the policy's collect-side keys (epsilon...) -> monitor as collector/<key>
            learner.record_collect(result.metrics)
        return result


class OnPolicyLoop(Loop):
    """The on-policy loop (PPG...): each step collects ``policy.rollout_steps`` steps per environment and trains
    once on the ``[T, N, ...]`` rollout tensors (:func:`rlearn.buffer.rollout_to_tensors`)."""

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
