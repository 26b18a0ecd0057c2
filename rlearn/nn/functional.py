"""Feature-major ReLU-MLP kernels and the autograd ``Function`` that runs them: activations ``[features, batch]``
and weights ``[out, in]``, so every product reads and writes contiguous matrices (faster with MKL), and the
backward pass computes only what autograd asks for. :func:`mlp` is the entry point (batch-major in and out).
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from rlearn.nn.relu_grad import relu_backward_

__all__ = ["Dense", "linear", "mlp_forward", "mlp_backward", "FeatureMajorMLP", "mlp", "fused_kernels_enabled",
           "feature_major", "feature_major_layers", "plain_mlp", "tanh", "SIGMOID_TANH_MIN_NUMEL"]


class Dense(NamedTuple):
    """One dense layer, feature-major: ``y = weight @ x + bias`` with ``x [in, B]``, ``weight [out, in]``,
    ``bias [out, 1]`` (or ``n`` stacked: ``[n, out, in]``, ``[n, out, 1]``)."""

    weight: torch.Tensor
    bias: torch.Tensor


def fused_kernels_enabled(device: torch.device) -> bool:
    """Whether :func:`mlp` runs the feature-major kernels on ``device``: the CPU only (cuBLAS runs either layout
    equally well)."""
    return device.type == "cpu"


def linear(x: torch.Tensor, layer: Dense) -> torch.Tensor:
    """``layer.weight @ x + layer.bias``, feature-major; stacked layers take ``x [in, B]`` shared by every member
    or ``[n, in, B]``."""
    weight, bias = layer
    if weight.dim() == 3:
        return torch.baddbmm(bias, weight, x.expand(weight.shape[0], -1, -1) if x.dim() == 2 else x)
    return torch.addmm(bias, weight, x)


def mlp_forward(x: torch.Tensor, layers: Sequence[Dense], tanh_output: bool = False) -> List[torch.Tensor]:
    """Forward pass of a feature-major ReLU MLP keeping what :func:`mlp_backward` needs: ``[x, h_1, ..., h_L]``;
    the last layer is linear, or ``tanh`` with ``tanh_output``."""
    outputs = [x]
    last = len(layers) - 1
    for i, layer in enumerate(layers):
        h = linear(outputs[-1], layer)
        if i < last:
            h = h.relu_()
        elif tanh_output:
            h = h.tanh_()
        outputs.append(h)
    return outputs


#: input widths below which a single layer's weight gradient is computed transposed (see _weight_gradient)
_NARROW_INPUT = 16


def _weight_gradient(h: torch.Tensor, grad: torch.Tensor, stacked: bool) -> Dense:
    """``grad @ h^T`` and ``sum_batch grad`` (batched if ``stacked``)."""
    bias = grad.sum(-1, keepdim=True)
    if stacked and h.dim() == 2:
        h = h.expand(grad.shape[0], -1, -1)  # the input shared by every member
    if h.shape[-2] < _NARROW_INPUT:
        # a layer with few inputs (e.g. an actor's or a critic's first: obs_dim (+ act_dim) of them): MKL's
        # [out, B] x [B, in] product is slow for such a narrow result (~95 us for [400, 256] x [256, 3]);
        # [in, B] x [B, out] is fast (~30 us), so compute the transpose (returned as a transposed view)
        if stacked:
            return Dense(torch.bmm(h, grad.transpose(-1, -2)).transpose(-1, -2), bias)
        return Dense(torch.mm(h, grad.t()).t(), bias)
    weight = torch.bmm(grad, h.transpose(-1, -2)) if stacked else torch.mm(grad, h.t())
    return Dense(weight, bias)


def mlp_backward(outputs: Sequence[torch.Tensor], grad_output: torch.Tensor, layers: Sequence[Dense],
                 tanh_output: bool = False, weight_grads: bool = True, input_grad: bool = False
                 ) -> Tuple[Optional[torch.Tensor], Optional[List[Dense]]]:
    """Backward pass through :func:`mlp_forward` given ``grad_output = dL/dh_L`` (never modified): ``(dL/dx,
    [Dense(dW_i, db_i), ...])``, each only when asked for (``input_grad``: per member for a shared input)."""
    grad = grad_output
    if tanh_output:
        grad = grad * (1.0 - outputs[-1].square())
    grads: List[Optional[Dense]] = [None] * len(layers)
    for i in range(len(layers) - 1, -1, -1):
        weight = layers[i].weight
        if i < len(layers) - 1:
            grad = relu_backward_(grad, outputs[i + 1])  # grad is a fresh product here: ours to overwrite
        if weight_grads:
            grads[i] = _weight_gradient(outputs[i], grad, weight.dim() == 3)
        if i > 0 or input_grad:
            if weight.shape[-2] == 1:  # an outer product: elementwise is faster than a k=1 matmul
                grad = weight.transpose(-1, -2) * grad
            else:
                grad = torch.matmul(weight.transpose(-1, -2), grad)
    return (grad if input_grad else None), (grads if weight_grads else None)  # type: ignore[return-value]


def _as_layers(params: Sequence[torch.Tensor]) -> List[Dense]:
    """``(w_0, b_0, w_1, b_1, ...)`` -> feature-major :class:`Dense` layers (a ``[out]`` bias becomes ``[out, 1]``)."""
    return [Dense(w, b.unsqueeze(-1) if b.dim() < w.dim() else b) for w, b in zip(params[0::2], params[1::2])]


def feature_major_layers(params: Sequence[torch.Tensor]) -> List[Dense]:
    """Detached feature-major :class:`Dense` views of ``(w_0, b_0, w_1, b_1, ...)`` for :func:`mlp`'s ``layers``
    (sharing the parameters' storage: in-place updates are seen through them)."""
    with torch.no_grad():
        return _as_layers([p.detach() for p in params])


def feature_major(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` transposed to ``[..., features, batch]``, contiguous, in ``dtype`` (one copy)."""
    xt = x.transpose(-1, -2)
    if xt.dtype == dtype:
        return xt.contiguous()
    return torch.empty(xt.shape, dtype=dtype, device=x.device).copy_(xt)


class FeatureMajorMLP(torch.autograd.Function):
    """``autograd.Function`` of a ReLU MLP, batch-major at its boundary, feature-major inside:
    ``FeatureMajorMLP.apply(x, tanh_output, layers, w_0, b_0, w_1, b_1, ...)``, ``x [B, in]`` (or ``[n, B, in]``)
    -> ``[B, out]`` (or ``[n, B, out]``). ``layers``: None, the parameters' :func:`feature_major_layers`, or
    lower-precision copies (:func:`~rlearn.nn.low_precision.low_precision_layers`: the products run in that
    dtype; input, output and gradients keep theirs). Backward computes only the gradients autograd asks for.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, tanh_output: bool, layers: Optional[Sequence[Dense]],
                *params: torch.Tensor) -> torch.Tensor:
        if layers is None:
            layers = _as_layers(params)
        outputs = mlp_forward(feature_major(x, layers[0].weight.dtype), layers, tanh_output)
        ctx.outputs = outputs  # plain tensors made here (no grad_fn): no reference cycle through ctx
        ctx.layers = layers
        ctx.tanh_output = tanh_output
        ctx.x_dtype = x.dtype
        ctx.shared_input = x.dim() == 2 and layers[0].weight.dim() == 3
        ctx.save_for_backward(*params)  # version-checked: an in-place update before backward is an error
        out = outputs[-1].transpose(-1, -2)
        return out if out.dtype == x.dtype else out.to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        params = ctx.saved_tensors  # raises if a parameter was updated in place since the forward pass
        need = ctx.needs_input_grad
        low = ctx.layers[0].weight.dtype
        if grad_out.dtype != low:
            grad = feature_major(grad_out, low)
        else:  # a transposed view; only a broadcast gradient (a mean's) is copied: its products take slow paths
            grad = (grad_out.contiguous() if 0 in grad_out.stride() else grad_out).transpose(-1, -2)
        grad_x, grads = mlp_backward(ctx.outputs, grad, ctx.layers, ctx.tanh_output,
                                     weight_grads=any(need[3:]), input_grad=need[0])
        ctx.outputs = ctx.layers = None
        if grad_x is not None:
            grad_x = (grad_x.sum(0) if ctx.shared_input else grad_x).transpose(-1, -2)
            grad_x = grad_x if grad_x.dtype == ctx.x_dtype else grad_x.to(ctx.x_dtype)
        flat: List[Optional[torch.Tensor]] = [None] * len(params)
        for i, layer_grad in enumerate(grads or ()):
            for j, grad in ((2 * i, layer_grad.weight), (2 * i + 1, layer_grad.bias)):
                if need[3 + j]:
                    param = params[j]
                    grad = grad if grad.dtype == param.dtype else grad.to(param.dtype)
                    # an [out] bias gets its own shape from the kernels' [out, 1] (squeeze: cheaper than view)
                    flat[j] = grad if grad.dim() == param.dim() else grad.squeeze(-1)
        return (grad_x, None, None, *flat)


#: elements from which the CPU tanh is computed through sigmoid (measured break-even: about [64, 64])
SIGMOID_TANH_MIN_NUMEL = 8192


def tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)``, on the CPU from :data:`SIGMOID_TANH_MIN_NUMEL` elements as ``2 sigmoid(2x) - 1`` (the same
    within float rounding; torch's CPU ``tanh`` measured 2-3x slower than its ``sigmoid``)."""
    if x.device.type == "cpu" and x.numel() >= SIGMOID_TANH_MIN_NUMEL:
        return torch.sigmoid(x + x).mul(2.0).sub_(1.0)  # x + x: no scalar-to-tensor conversion
    return torch.tanh(x)


#: the activations by name: ReLU in place (the product's or the norm's backward needs its inputs, not its
#: output), tanh through :func:`tanh`, None for none
_ACTIVATIONS = {"relu": torch.Tensor.relu_, "tanh": tanh, None: None}


def _layer_norm(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Layer norm over the features of ``h``; ``weight``/``bias`` ``[out]``, or stacked ``[n, 1, out]`` (or one
    member's ``[1, out]``)."""
    if weight.dim() == 1:
        return F.layer_norm(h, h.shape[-1:], weight, bias)
    return torch.addcmul(bias, F.layer_norm(h, h.shape[-1:]), weight)


def plain_mlp(x: torch.Tensor, params: Sequence[torch.Tensor], activation: Optional[str] = "relu",
              output_activation: Optional[str] = None,
              norms: Optional[Sequence[Tuple[torch.Tensor, torch.Tensor]]] = None) -> torch.Tensor:
    """An MLP ``(w_0, b_0, w_1, b_1, ...)`` with batch-major autograd operations: ``activation`` after every layer
    but the last, ``output_activation`` after it, a layer norm (``norms``: one ``(weight, bias)`` per hidden
    layer) before each hidden activation; stacked parameters run every member at once."""
    hidden, output = _ACTIVATIONS[activation], _ACTIVATIONS[output_activation]
    # every layer has the first one's layout (a method call on a Parameter costs a dispatch check: ask once)
    stacked, flat_bias = params[0].dim() == 3, params[1].dim() == 1
    h = x
    last = len(params) // 2 - 1
    for i in range(last + 1):
        w, b = params[2 * i], params[2 * i + 1]
        if stacked:  # w @ h^T per member: the gradients come out in the parameters' own layout (as DDP wants)
            h_t = h.t().expand(w.shape[0], -1, -1) if h.dim() == 2 else h.transpose(-1, -2)
            h = torch.baddbmm(b if b.dim() == 3 else b.unsqueeze(-1), w, h_t).transpose(-1, -2)
        else:
            h = F.linear(h, w, b if flat_bias else b.reshape(-1))
        if i < last:
            if norms is not None:
                h = _layer_norm(h, *norms[i])
            if hidden is not None:
                h = hidden(h)
        elif output is not None:
            h = output(h)
    return h


def mlp(x: torch.Tensor, params: Sequence[torch.Tensor], tanh_output: bool = False,
        layers: Optional[Sequence[Dense]] = None) -> torch.Tensor:
    """A ReLU MLP ``(w_0, b_0, w_1, b_1, ...)`` on batch-major ``x``, differentiable: :class:`FeatureMajorMLP`
    when a gradient may be needed, the kernels directly when none can be, plain operations off the CPU.
    ``layers``: the parameters' :func:`feature_major_layers`, if the caller keeps them."""
    if not fused_kernels_enabled(x.device):
        return plain_mlp(x, params, "relu", "tanh" if tanh_output else None)
    if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
        return FeatureMajorMLP.apply(x, tanh_output, layers, *params)
    # nothing requires a gradient: no graph would be recorded, so run the kernels without the Function
    if layers is None:
        layers = _as_layers(params)
    return mlp_forward(x.transpose(-1, -2).contiguous(), layers, tanh_output)[-1].transpose(-1, -2)
