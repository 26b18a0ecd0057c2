"""Opt-in bfloat16 compute for the feature-major MLP kernels: fp32 parameters, bf16 products.

:func:`mlp_low_precision` runs the same ReLU MLP as :func:`rlearn.nn.functional.mlp` with every product,
activation and gradient in bf16, while parameters, their gradients and the optimizer stay fp32; the output is
cast back, so losses are computed in fp32. About twice the matmul speed on CPUs with native bf16
(:func:`native_bf16_cpu`), slower without; off the CPU the plain path runs under ``torch.autocast``.
See docs/speed-parts.md.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

import torch

from rlearn.nn.functional import Dense, _as_layers, _plain_mlp, fused_kernels_enabled, mlp_backward, mlp_forward

__all__ = ["low_precision_layers", "LowPrecisionMLP", "mlp_low_precision", "native_bf16_cpu", "COMPUTE_DTYPES"]

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


def _feature_major(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` transposed to ``[..., features, batch]``, contiguous, in ``dtype``: one copy (a cast and a
    ``contiguous()`` would be two)."""
    xt = x.transpose(-1, -2)
    if xt.dtype == dtype:
        return xt.contiguous()
    return torch.empty(xt.shape, dtype=dtype, device=x.device).copy_(xt)


def low_precision_layers(params: Sequence[torch.Tensor], dtype: torch.dtype,
                         member: Optional[int] = None) -> List[Dense]:
    """``dtype`` copies of ``params`` = ``(w_0, b_0, w_1, b_1, ...)`` as feature-major
    :class:`~rlearn.nn.functional.Dense` layers (stacked member ``member`` alone if given), as they are now.

    Made anew for every forward pass: optimizer steps update parameters in place without bumping their
    version counters, so no cache could tell a stale copy.
    """
    with torch.no_grad():
        chosen = [p.detach() if member is None else p.detach()[member] for p in params]
        return _as_layers([p.to(dtype) for p in chosen])


class LowPrecisionMLP(torch.autograd.Function):
    """:class:`~rlearn.nn.functional.FeatureMajorMLP` with its products in the layers' dtype (bf16).

    ``LowPrecisionMLP.apply(x, tanh_output, layers, w_0, b_0, ...)``: ``layers`` are the parameters'
    low-precision copies (:func:`low_precision_layers`), ``w_i, b_i`` the fp32 parameters the gradients
    are returned for (cast to their dtype). Input and output are in ``x``'s dtype.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, tanh_output: bool, layers: Sequence[Dense],
                *params: torch.Tensor) -> torch.Tensor:
        low = layers[0].weight.dtype
        outputs = mlp_forward(_feature_major(x, low), layers, tanh_output)
        ctx.outputs, ctx.layers, ctx.tanh_output = outputs, layers, tanh_output
        ctx.x_dtype = x.dtype
        ctx.shared_input = x.dim() == 2 and layers[0].weight.dim() == 3
        ctx.save_for_backward(*params)  # version-checked: an in-place update before backward is an error
        return outputs[-1].transpose(-1, -2).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        params = ctx.saved_tensors
        need = ctx.needs_input_grad
        low = ctx.layers[0].weight.dtype
        grad = _feature_major(grad_out, low)
        grad_x, grads = mlp_backward(ctx.outputs, grad, ctx.layers, ctx.tanh_output,
                                     weight_grads=any(need[3:]), input_grad=need[0])
        ctx.outputs = ctx.layers = None
        if grad_x is not None:
            grad_x = (grad_x.sum(0) if ctx.shared_input else grad_x).transpose(-1, -2).to(ctx.x_dtype)
        flat: List[Optional[torch.Tensor]] = [None] * len(params)
        if grads is not None:
            for i, layer_grad in enumerate(grads):
                weight, bias = params[2 * i], params[2 * i + 1]
                if need[3 + 2 * i]:
                    flat[2 * i] = layer_grad.weight.to(weight.dtype)
                if need[4 + 2 * i]:
                    flat[2 * i + 1] = layer_grad.bias.to(bias.dtype).view(bias.shape)
        return (grad_x, None, None, *flat)


def mlp_low_precision(x: torch.Tensor, params: Sequence[torch.Tensor], tanh_output: bool,
                      dtype: torch.dtype = torch.bfloat16, member: Optional[int] = None) -> torch.Tensor:
    """:func:`rlearn.nn.functional.mlp` with its arithmetic in ``dtype`` (see the module docstring).

    ``params``: the fp32 parameters ``(w_0, b_0, ...)`` (stacked ``[n, ...]`` for an ensemble); ``member``:
    run stacked member ``i`` alone. Differentiable with respect to ``x`` and the fp32 parameters.
    """
    chosen = params if member is None else [p[member] for p in params]
    if not fused_kernels_enabled(x.device):
        with torch.autocast(x.device.type, dtype=dtype):
            out = _plain_mlp(x, chosen, tanh_output)
        return out.to(x.dtype)
    layers = low_precision_layers(params, dtype, member)
    if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
        return LowPrecisionMLP.apply(x, tanh_output, layers, *chosen)
    out = mlp_forward(_feature_major(x, dtype), layers, tanh_output)[-1]
    return out.transpose(-1, -2).to(x.dtype)
