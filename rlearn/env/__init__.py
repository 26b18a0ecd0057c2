"""Environments and the two loops that run a policy in them.

* :func:`make_vector_env` builds seeded gymnasium vector environments in ``SAME_STEP`` autoreset mode;
  :func:`register_env` registers a custom environment under an id.
* :class:`Collector` gathers exploration transitions (``[n_steps, num_envs, ...]`` arrays) and ended episodes.
* :class:`Evaluator` plays exactly N episodes with the deterministic policy and summarises them.

This package does not import torch, so asynchronous workers that unpickle an environment factory start fast.
"""

from rlearn.env.collector import RESERVED_KEYS, CollectResult, Collector
from rlearn.env.evaluator import Evaluator
from rlearn.env.vector_env import (
    DEFAULT_ASYNC_CONTEXT,
    derive_seed,
    make_env_fn,
    make_vector_env,
    observation_dtype,
    register_env,
)

__all__ = [
    "DEFAULT_ASYNC_CONTEXT",
    "RESERVED_KEYS",
    "CollectResult",
    "Collector",
    "Evaluator",
    "derive_seed",
    "make_env_fn",
    "make_vector_env",
    "observation_dtype",
    "register_env",
]
