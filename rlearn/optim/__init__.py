"""Optimizer helpers: :class:`AdamStep` and :func:`make_adam` (fused Adam), :func:`clip_grad_norm_`,
:func:`polyak_update_` and the fenced multi-tensor kernels of :mod:`rlearn.optim.foreach` (docs/speed-parts.md).
"""

from rlearn.optim import foreach
from rlearn.optim.adam_step import AdamStep, direct_step_ok, make_adam
from rlearn.optim.clip import clip_grad_norm_
from rlearn.optim.polyak import polyak_update_

__all__ = ["AdamStep", "make_adam", "direct_step_ok", "polyak_update_", "clip_grad_norm_", "foreach"]
