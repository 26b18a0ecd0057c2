"""Environments: seeded gymnasium vector environments in ``SAME_STEP`` autoreset mode.

* :func:`make_vector_env` builds them; :func:`register_env` registers a custom environment under an id.

The loops that run a policy in them (:class:`~rlearn.collect.Collector`, :class:`~rlearn.collect.Evaluator`)
live in :mod:`rlearn.collect`. This package does not import torch, so asynchronous workers that unpickle an
environment factory start fast.
"""

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
    "derive_seed",
    "make_env_fn",
    "make_vector_env",
    "observation_dtype",
    "register_env",
]
