"""``EvalHook``: evaluate the deterministic policy every ``freq`` env steps and at the end; stop at a target.

The run (:mod:`rlearn.run`) calls :meth:`EvalHook.evaluate_if_due` after each collection and the learner
iterations it earned, and :meth:`EvalHook.evaluate_at_end` once the loop is over. One evaluation::

    before_eval hooks -> rank 0 plays ``evaluator.n_episodes`` episodes -> log line, table, TensorBoard
    -> (several processes) rank 0 broadcasts (result, stop) -> after_eval hooks

Its state (envstep and train_iter of the last evaluation, its result) is :attr:`EvalHook.state`, an
:class:`EvalState`. The run saves it in every checkpoint inside ``states["pipeline"]`` (fields
``last_eval_envstep``, ``last_eval_iter``, ``last_eval``, as checkpoints always had); when you use the
hook in your own loop, register it yourself: ``learner.register_state("eval", hook.state)``.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Mapping, Optional, Tuple

from rlearn.hooks.base import Hook, Priority
from rlearn.registry import HOOKS
from rlearn.trace import NOOP_SPAN, span

__all__ = ["EvalHook", "EvalState", "EVAL_TB_KEYS"]

#: keys of an evaluation result written to TensorBoard (``evaluator_step/<k>``, ``evaluator_iter/<k>``)
EVAL_TB_KEYS = ("episode_return_mean", "episode_return_std", "episode_return_min", "episode_return_max",
                "episode_length_mean")


class EvalState:
    """When the last evaluation happened and what it gave (saved in checkpoints).

    Attributes:
        last_envstep: envstep of the last evaluation (0 before the first).
        last_iter: train_iter of the last evaluation.
        last_result: the last evaluation result (see :meth:`rlearn.collect.Evaluator.evaluate`), or None.
    """

    KEYS = ("last_eval_envstep", "last_eval_iter", "last_eval")

    def __init__(self) -> None:
        self.last_envstep = 0
        self.last_iter = 0
        self.last_result: Optional[Dict[str, float]] = None

    def state_dict(self) -> Dict[str, Any]:
        return {
            "last_eval_envstep": self.last_envstep,
            "last_eval_iter": self.last_iter,
            "last_eval": copy.deepcopy(self.last_result),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; other keys are a ``ValueError`` naming them."""
        if not isinstance(state, Mapping) or set(state) != set(self.KEYS):
            keys = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"evaluation state: expected keys {sorted(self.KEYS)}, got {keys}")
        self.last_envstep = int(state["last_eval_envstep"])
        self.last_iter = int(state["last_eval_iter"])
        self.last_result = copy.deepcopy(state["last_eval"])


def _optional_positive_int(name: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"EvalHook {name} must be a positive int or None, got {value!r}")
    return value


@HOOKS.register
class EvalHook(Hook):
    """Evaluate every ``freq`` env steps (and at the end); ``stop_value`` ends the run early.

    Args:
        evaluator: a :class:`rlearn.collect.Evaluator` (anything with ``evaluate() -> dict``); None lets
            the run attach its own (so a config may name the hook: ``dict(type="EvalHook", freq=5000)``).
        freq: env steps between two evaluations: one runs each time ``learner.envstep`` reaches a new
            multiple of ``freq``; None evaluates only at the end.
        stop_value: an evaluation whose ``episode_return_mean`` reaches it asks the run to stop.

    In a run of several processes only rank 0 plays the episodes; the other ranks receive its result and
    stop decision (one broadcast), so every rank stops at the same iteration.
    """

    DEFAULT_PRIORITY = Priority.NORMAL

    def __init__(self, evaluator: Any = None, freq: Optional[int] = None, stop_value: Optional[float] = None) -> None:
        self.evaluator = evaluator
        self.freq = _optional_positive_int("freq", freq)
        if stop_value is not None and (isinstance(stop_value, bool) or not isinstance(stop_value, (int, float))):
            raise ValueError(f"EvalHook stop_value must be a number or None, got {stop_value!r}")
        self.stop_value = None if stop_value is None else float(stop_value)
        self.state = EvalState()

    # --------------------------------------------------------------------------------------- when
    def due(self, learner: Any) -> bool:
        """True when ``learner.envstep`` reached a new multiple of ``freq`` since the last evaluation."""
        return self.freq is not None and self.every_n_envsteps(learner, self.freq, self.state.last_envstep)

    def evaluate_if_due(self, learner: Any) -> bool:
        """Evaluate if :meth:`due`; True when the run should stop (``stop_value`` reached)."""
        return self.due(learner) and self.evaluate(learner)

    def evaluate_at_end(self, learner: Any) -> None:
        """The final evaluation: only if none happened at this envstep already."""
        if self.state.last_envstep != learner.envstep:
            self.evaluate(learner)

    @property
    def last_return(self) -> Optional[float]:
        """``episode_return_mean`` of the last evaluation, or None."""
        result = self.state.last_result
        return None if result is None else result["episode_return_mean"]

    # ---------------------------------------------------------------------------------------- how
    def evaluate(self, learner: Any) -> bool:
        """Evaluate now (rank 0) and report; True when ``stop_value`` is reached (the same on every rank)."""
        from rlearn import distributed as dist

        if self.evaluator is None:
            raise ValueError("EvalHook has no evaluator: pass one, or let rlearn.run attach the run's")
        envstep, train_iter = learner.envstep, learner.train_iter
        learner.call_hook("before_eval")
        if learner.rank == 0:
            with span("evaluator/eval", lane="evaluator", iter=train_iter):
                result, stop = self._evaluate(learner)
        else:
            result, stop = None, False
        if learner.world_size > 1:
            # only the ranks that wait record the wait (rank 0 sends the result it just computed)
            waiting = span("evaluator/wait_for_rank0", lane="evaluator", iter=train_iter) if learner.rank else NOOP_SPAN
            with waiting:
                result, stop = dist.broadcast_object((result, stop))
        self.state.last_result, self.state.last_envstep, self.state.last_iter = result, envstep, train_iter
        learner.call_hook("after_eval")
        return stop

    def _evaluate(self, learner: Any) -> Tuple[Dict[str, float], bool]:
        import torch

        with torch.no_grad():
            result = self.evaluator.evaluate()
        self._report(learner, result)
        stop = self.stop_value is not None and result["episode_return_mean"] >= self.stop_value
        if stop:
            learner.logger.info(
                "stop_value reached: episode_return_mean %.4g >= eval.stop_value %.4g at envstep %d; stopping",
                result["episode_return_mean"], self.stop_value, learner.envstep,
            )
        return result, stop

    def _report(self, learner: Any, result: Mapping[str, float]) -> None:
        """The log line of one evaluation result, then the result to every writer of the learner (the table,
        TensorBoard's ``evaluator_iter/<k>`` and ``evaluator_step/<k>``...)."""
        envstep, train_iter = learner.envstep, learner.train_iter
        learner.logger.info(
            "evaluation at envstep %d (train_iter %d): episode_return %.4g +- %.4g (min %.4g, max %.4g) over %d "
            "episodes, episode_length %.1f",
            envstep, train_iter, result["episode_return_mean"], result["episode_return_std"],
            result["episode_return_min"], result["episode_return_max"], result["episodes"], result["episode_length_mean"],
        )
        learner.write_scalars({f"evaluator/{key}": result[key] for key in EVAL_TB_KEYS}, train_iter, envstep)
