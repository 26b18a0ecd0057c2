"""Opt-in bfloat16 compute for the feature-major MLP kernels (docs/speed-parts.md): :func:`mlp_low_precision` runs
:func:`rlearn.nn.functional.mlp` with products, activations and gradients in bf16 while parameters, their
gradients, the optimizer and the losses stay fp32. About twice the matmul speed on CPUs with native bf16
(:func:`native_bf16_cpu`), slower without; off the CPU the plain path runs under ``torch.autocast``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import List, Optional, Sequence

import torch

from rlearn.nn.functional import (Dense, FeatureMajorMLP, _as_layers, feature_major, fused_kernels_enabled, mlp_forward,
                                  plain_mlp)

__all__ = ["low_precision_layers", "mlp_low_precision", "native_bf16_cpu", "COMPUTE_DTYPES"]

#: the compute dtypes the MLP modules accept, by config name (None: the parameters' own dtype, fp32)
COMPUTE_DTYPES = {"fp32": None, "bf16": torch.bfloat16}


@functools.lru_cache(maxsize=None)
def native_bf16_cpu() -> bool:
    """Whether this CPU has native bf16 matrix instructions (``avx512_bf16`` or AMX), read from
    ``/proc/cpuinfo`` (False where it cannot be read)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def low_precision_layers(params: Sequence[torch.Tensor], dtype: torch.dtype,
                         member: Optional[int] = None) -> List[Dense]:
    """``dtype`` copies of ``params`` (``w_0, b_0, ...``; member ``member`` alone if given) as feature-major
    :class:`~rlearn.nn.functional.Dense` layers. Made anew for every forward pass: optimizer steps update
    parameters in place without bumping their version counters, so no cache could tell a stale copy."""
    with torch.no_grad():
        chosen = [p.detach() if member is None else p.detach()[member] for p in params]
        return _as_layers([p.to(dtype) for p in chosen])


def mlp_low_precision(x: torch.Tensor, params: Sequence[torch.Tensor], tanh_output: bool,
                      dtype: torch.dtype = torch.bfloat16, member: Optional[int] = None) -> torch.Tensor:
    """:func:`rlearn.nn.functional.mlp` with its arithmetic in ``dtype``, differentiable with respect to ``x`` and
    the fp32 ``params`` (stacked ``[n, ...]`` for an ensemble, of which ``member`` runs one alone)."""
    chosen = params if member is None else [p[member] for p in params]
    if not fused_kernels_enabled(x.device):
        with torch.autocast(x.device.type, dtype=dtype):
            out = plain_mlp(x, chosen, "relu", "tanh" if tanh_output else None)
        return out.to(x.dtype)
    layers = low_precision_layers(params, dtype, member)
    if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
        return FeatureMajorMLP.apply(x, tanh_output, layers, *chosen)
    out = mlp_forward(feature_major(x, dtype), layers, tanh_output)[-1]
    return out.transpose(-1, -2).to(x.dtype)
