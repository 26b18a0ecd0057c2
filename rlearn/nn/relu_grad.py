"""The gradient through a ReLU, in place, given its output: ``torch.ops.aten.threshold_backward.grad_input``
(autograd's own kernel, not public API), which :func:`available` compares bit for bit with the public
``grad.masked_fill_(output <= 0, 0)`` once per process; the public form runs if it is missing, raises or differs.
"""

from __future__ import annotations

import functools

import torch

__all__ = ["available", "relu_backward_"]


def _public_relu_backward_(grad: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    return grad.masked_fill_(output <= 0, 0.0)


def _private_relu_backward_(grad: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.threshold_backward.grad_input(grad, output, 0.0, grad_input=grad)


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Once per process: does the ATen kernel give exactly the public form's result, in place?"""
    try:
        gen = torch.Generator().manual_seed(0)
        output = torch.randn(37, 11, generator=gen).relu_()
        output[0, :3] = torch.tensor([0.0, -0.0, float("nan")])
        output[1, 0] = -1.0
        grad = torch.randn(37, 11, generator=gen)
        fast, slow = grad.clone(), grad.clone()
        result = _private_relu_backward_(fast, output)
        _public_relu_backward_(slow, output)
        return result.data_ptr() == fast.data_ptr() and torch.equal(fast, slow)
    except Exception:  # any failure of the private path means: use the public form
        return False


def relu_backward_(grad: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """``grad * (output > 0)`` written into ``grad`` (the gradient through a ReLU given its output), returned;
    a NaN output passes its gradient on, as autograd's ReLU backward does."""
    if available():
        return _private_relu_backward_(grad, output)
    return _public_relu_backward_(grad, output)
