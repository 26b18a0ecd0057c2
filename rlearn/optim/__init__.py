"""Optimizer helpers (see ``docs/speed-parts.md``).

* :class:`AdamStep`: ``step()`` of a fused ``torch.optim.Adam`` without its per-call Python overhead,
  behind a start-up self-check (:func:`direct_step_ok`);
* :func:`make_adam`: a fused Adam where the running torch has the kernel, the default one otherwise;
* :func:`clip_grad_norm_`: ``torch.nn.utils.clip_grad_norm_``'s result, bit for bit, with its kernels called
  directly;
* :func:`polyak_update_`: target-network averaging in one multi-tensor call;
* :mod:`rlearn.optim.foreach`: the private multi-tensor kernels behind a self-check, with public fallbacks.
"""

from rlearn.optim import foreach
from rlearn.optim.adam_step import AdamStep, direct_step_ok, fused_adam_supported, make_adam
from rlearn.optim.clip import clip_grad_norm_
from rlearn.optim.polyak import polyak_update_

__all__ = ["AdamStep", "make_adam", "fused_adam_supported", "direct_step_ok", "polyak_update_", "clip_grad_norm_",
           "foreach"]
