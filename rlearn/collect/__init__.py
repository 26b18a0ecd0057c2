"""The two loops that run a policy in environments (env -> **collect** -> buffer -> learner).

* :class:`Collector` gathers exploration transitions (``[n_steps, num_envs, ...]`` arrays) and ended episodes.
* :class:`Evaluator` plays exactly N episodes with the deterministic policy and summarises them.
"""

from rlearn.collect.collector import RESERVED_KEYS, CollectResult, Collector
from rlearn.collect.evaluator import Evaluator

__all__ = ["RESERVED_KEYS", "CollectResult", "Collector", "Evaluator"]
