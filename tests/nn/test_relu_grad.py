"""``rlearn.nn.relu_grad``: the ATen ReLU-backward kernel passes its self-check here, and without it the
feature-major networks' gradients are bit for bit the same through the public form."""

from __future__ import annotations

import pytest
import torch

from rlearn.nn import MLP, relu_grad


@pytest.fixture
def fresh_check():
    relu_grad.available.cache_clear()
    yield
    relu_grad.available.cache_clear()


def _gradients():
    torch.manual_seed(0)
    actor, critics = MLP([3, 256, 48, 1], output_activation="tanh"), MLP([4, 256, 48, 1], ensemble=2)  # feature-major
    x = torch.randn(256, 3, requires_grad=True)
    q = critics(torch.cat([x, actor(x)], dim=1))
    (q.square().mean() + actor(x).sum()).backward()
    return [x.grad] + [p.grad for p in (*actor.parameters(), *critics.parameters())]


def test_the_kernel_passes_on_this_torch(fresh_check):
    assert relu_grad.available() is True


def test_zero_negative_and_nan_outputs_as_autograd_does(fresh_check):
    """A zero or negative output blocks the gradient, a NaN output passes it on (autograd's ReLU backward)."""
    x = torch.tensor([1.0, 0.0, -1.0, float("nan")], requires_grad=True)
    torch.relu(x).backward(torch.full((4,), 2.0))
    output = torch.relu(x.detach())
    assert torch.equal(relu_grad.relu_backward_(torch.full((4,), 2.0), output), x.grad)
    assert torch.equal(relu_grad._public_relu_backward_(torch.full((4,), 2.0), output), x.grad)


@pytest.mark.parametrize("breakage", ["raises", "different"])
def test_without_the_kernel_the_gradients_are_the_same_bits(fresh_check, monkeypatch, breakage):
    fast = _gradients()
    relu_grad.available.cache_clear()

    def broken(grad, output):
        if breakage == "raises":  # a torch release without the operator overload
            raise RuntimeError("no such overload")
        return grad  # an operator that leaves the gradient as it is

    monkeypatch.setattr(relu_grad, "_private_relu_backward_", broken)
    assert relu_grad.available() is False
    public = _gradients()
    assert len(fast) == len(public) and all(torch.equal(a, b) for a, b in zip(fast, public))
