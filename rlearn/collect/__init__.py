"""The two loops that run a policy in environments (env -> **collect** -> buffer -> learner): the
:class:`Collector` gathers exploration transitions, the :class:`Evaluator` plays N deterministic episodes."""

from rlearn.collect.collector import RESERVED_KEYS, CollectResult, Collector
from rlearn.collect.evaluator import Evaluator

__all__ = ["RESERVED_KEYS", "CollectResult", "Collector", "Evaluator"]
