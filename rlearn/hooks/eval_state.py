"""What the :class:`~rlearn.hooks.EvalHook` remembers between evaluations and across checkpoints
(:class:`EvalState`, :class:`EvalProgress`), and the reader of its ``evaluations.jsonl`` file."""

from __future__ import annotations

import copy
import json
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

from rlearn.values import is_int

__all__ = ["EvalState", "EvalProgress", "read_evaluations"]


def _check_keys(what: str, state: Any, keys: Sequence[str]) -> None:
    """A ``ValueError`` naming the keys when ``state`` is not a mapping with exactly ``keys``."""
    if not isinstance(state, Mapping) or set(state) != set(keys):
        found = sorted(state) if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(f"{what}: expected keys {sorted(keys)}, got {found}")


class EvalState:
    """When the last evaluation happened (``last_envstep``: 0 before the first; ``last_iter``) and its result
    (``last_result``, see :meth:`rlearn.collect.Evaluator.evaluate`; None before it). Saved in checkpoints."""

    KEYS = ("last_eval_envstep", "last_eval_iter", "last_eval")

    def __init__(self) -> None:
        self.last_envstep = 0
        self.last_iter = 0
        self.last_result: Optional[Dict[str, float]] = None

    def state_dict(self) -> Dict[str, Any]:
        return {"last_eval_envstep": self.last_envstep, "last_eval_iter": self.last_iter,
                "last_eval": copy.deepcopy(self.last_result)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; other keys are a ``ValueError`` naming them."""
        _check_keys("evaluation state", state, self.KEYS)
        for key in ("last_eval_envstep", "last_eval_iter"):
            if not is_int(state[key]):
                raise ValueError(f"evaluation state: {key!r} must be an int, got {state[key]!r}")
        self.last_envstep = int(state["last_eval_envstep"])
        self.last_iter = int(state["last_eval_iter"])
        self.last_result = copy.deepcopy(state["last_eval"])


class EvalProgress:
    """The best evaluation so far (``best_return``: None before the first finite one; ``best_envstep``,
    ``best_iter``), ``evals_since_best`` (all evaluations while there is none) and ``last_video_envstep``
    (None before the first video). Saved in checkpoints."""

    KEYS = ("best_return", "best_envstep", "best_iter", "evals_since_best", "last_video_envstep")

    def __init__(self) -> None:
        self.best_return: Optional[float] = None
        self.best_envstep: Optional[int] = None
        self.best_iter: Optional[int] = None
        self.evals_since_best = 0
        self.last_video_envstep: Optional[int] = None

    def update(self, value: float, envstep: int, train_iter: int) -> bool:
        """Count one evaluation of mean return ``value``; True when it is a new best (strictly higher: a
        tie keeps the earlier one; NaN never is)."""
        value = float(value)
        if not math.isnan(value) and (self.best_return is None or value > self.best_return):
            self.best_return, self.best_envstep, self.best_iter = value, int(envstep), int(train_iter)
            self.evals_since_best = 0
            return True
        self.evals_since_best += 1
        return False

    def state_dict(self) -> Dict[str, Any]:
        return {key: getattr(self, key) for key in self.KEYS}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; other keys are a ``ValueError`` naming them."""
        _check_keys("evaluation progress", state, self.KEYS)
        self.best_return = None if state["best_return"] is None else float(state["best_return"])
        for key in ("best_envstep", "best_iter", "last_video_envstep"):
            setattr(self, key, None if state[key] is None else int(state[key]))
        self.evals_since_best = int(state["evals_since_best"])


def read_evaluations(path: Any) -> List[Dict[str, Any]]:
    """The rows of an ``evaluations.jsonl`` file (``envstep``, ``train_iter``, ``time``, ``returns``,
    ``lengths``), oldest first; a partly written last line (a crash mid-write) is skipped."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows
