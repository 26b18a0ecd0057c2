"""Named statistics of the gradient steps of one train iteration (PPO's minibatches, SAC's delayed actor steps),
reported as their means: ``steps.add(policy_loss=..., entropy=...)`` per step, then ``info.update(steps.means())``.
The means are computed together (one ``[steps, keys]`` table, one reduction) without a host transfer.
"""

from __future__ import annotations

from typing import Dict, List

import torch

__all__ = ["StepMeans"]


class StepMeans:
    """0-d tensors recorded by name, step by step (every :meth:`add` with the same names); :meth:`means` gives
    each name's mean over the steps."""

    def __init__(self) -> None:
        self._values: Dict[str, List[torch.Tensor]] = {}

    def add(self, **values: torch.Tensor) -> None:
        """Record one step's values (0-d tensors; gradients are not kept)."""
        for key, value in values.items():
            self._values.setdefault(key, []).append(value.detach())

    def __len__(self) -> int:
        """The number of steps recorded."""
        return max((len(values) for values in self._values.values()), default=0)

    def means(self) -> Dict[str, torch.Tensor]:
        """``{name: mean over the steps}`` as 0-d tensors, in the order the names were first added."""
        if not self._values:
            return {}
        counts = {key: len(values) for key, values in self._values.items()}
        if len(set(counts.values())) > 1:
            raise ValueError(f"StepMeans: every step must give the same names, got these counts: {counts}")
        keys = list(self._values)
        table = torch.stack([torch.stack(self._values[key]) for key in keys], dim=1)  # [steps, keys]
        return dict(zip(keys, table.mean(0).unbind()))
