"""``clip_grad_norm_``: ``torch.nn.utils.clip_grad_norm_``'s result, bit for bit, with its kernels called directly
(torch's function costs ~70 us of Python per call for a small network's six tensors; see docs/speed-parts.md).
"""

from __future__ import annotations

from typing import Iterable, List

import torch

from rlearn.optim import foreach

__all__ = ["clip_grad_norm_"]

#: a norm with ``norm + 1e-6 < max_norm * _CLEARLY_BELOW`` gets torch's coefficient 1 exactly (see below)
_CLEARLY_BELOW = 1.0 - 1e-5
#: gradient dtypes whose coefficient rounds finely enough for that margin (half precisions always multiply)
_SKIP_DTYPES = (torch.float32, torch.float64)


def clip_grad_norm_(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Bit for bit ``torch.nn.utils.clip_grad_norm_(parameters, max_norm)`` (L2, ``error_if_nonfinite=False``):
    scales the gradients in place to a global norm of at most ``max_norm`` and returns the norm *before* clipping
    as a 0-d tensor on the gradients' device (no gradient at all: ``tensor(0.)``)."""
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    elif not isinstance(parameters, (list, tuple)):
        parameters = list(parameters)  # walked twice below where torch's function takes over
    grads: List[torch.Tensor] = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    first = grads[0]
    device, dtype = first.device, first.dtype
    if any(g.is_sparse or g.device != device or g.dtype != dtype for g in grads):
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    max_norm = float(max_norm)
    with torch.no_grad():
        total_norm = torch.linalg.vector_norm(torch.stack(foreach.norms(grads)), 2.0)
        if device.type == "cpu" and dtype in _SKIP_DTYPES and total_norm.item() + 1e-6 < max_norm * _CLEARLY_BELOW:
            # on the CPU reading the norm costs no device sync. Clearly below the limit, torch's float32
            # coefficient max_norm / (norm + 1e-6) exceeds 1 by far more than its three roundings (~2e-7
            # relative) and is clamped to exactly 1: a multiplication by 1, which changes nothing, is skipped
            return total_norm
        clip_coef = max_norm / (total_norm + 1e-6)  # the expression torch evaluates (reciprocal, then mul)
        foreach.mul_(grads, clip_coef.clamp_(max=1.0))
    return total_norm
