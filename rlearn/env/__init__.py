"""Environments: seeded gymnasium vector environments in ``SAME_STEP`` autoreset mode (:func:`make_vector_env`,
:func:`register_env`). This package does not import torch, so asynchronous workers start fast."""

from rlearn.env.vector_env import (
    DEFAULT_ASYNC_CONTEXT, derive_seed, make_env_fn, make_vector_env, observation_dtype, register_env
)

__all__ = [
    "DEFAULT_ASYNC_CONTEXT", "derive_seed", "make_env_fn", "make_vector_env", "observation_dtype", "register_env"
]
