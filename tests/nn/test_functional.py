"""Feature-major MLP kernels and ``FeatureMajorMLP`` against plain autograd."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rlearn.nn.functional as nnf
from rlearn.nn.functional import Dense, FeatureMajorMLP, linear, mlp, mlp_backward, mlp_forward


@settings(max_examples=60, deadline=None)
@given(
    # widths on both sides of _NARROW_INPUT (16): weight gradients of narrow-input layers take another path
    sizes=st.lists(st.one_of(st.integers(1, 9), st.integers(15, 20)), min_size=2, max_size=5),
    batch=st.integers(1, 7),
    tanh=st.booleans(),
    members=st.sampled_from([None, 1, 2, 3]),
    seed=st.integers(0, 2**31 - 1),
)
def test_mlp_backward_matches_autograd(sizes, batch, tanh, members, seed):
    """mlp_forward/mlp_backward against autograd on random ReLU MLPs (float64, so exact up to rounding), single
    (``members=None``) or stacked (``[n, out, in]`` weights evaluated together on a shared input); the passes
    are feature-major (``x [in, B]``)."""
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    lead = () if members is None else (members,)
    layers = [
        Dense(rand(*lead, b, a).requires_grad_(), rand(*lead, b, 1).requires_grad_())
        for a, b in zip(sizes[:-1], sizes[1:])
    ]
    x = rand(sizes[0], batch).requires_grad_()
    upstream = rand(*lead, sizes[-1], batch)

    h = x  # autograd reference
    for i, layer in enumerate(layers):
        h = torch.matmul(layer.weight, h) + layer.bias
        h = torch.relu(h) if i < len(layers) - 1 else (torch.tanh(h) if tanh else h)
    (h * upstream).sum().backward()

    with torch.no_grad():
        outputs = mlp_forward(x.detach(), layers, tanh_output=tanh)
        torch.testing.assert_close(outputs[-1], h.detach())
        input_grad, grads = mlp_backward(outputs, upstream, layers, tanh_output=tanh, weight_grads=True,
                                         input_grad=True)
        assert mlp_backward(outputs, upstream, layers, tanh_output=tanh, weight_grads=False) == (None, None)
    # stacked: one input gradient per member, whose sum is the shared input's
    torch.testing.assert_close(input_grad if members is None else input_grad.sum(0), x.grad)
    for layer, grad in zip(layers, grads):
        torch.testing.assert_close(grad.weight, layer.weight.grad)
        torch.testing.assert_close(grad.bias, layer.bias.grad)


@pytest.mark.parametrize("shape", [(7, 5, 1), (2, 7, 5, 1), (7, 5, 3), (2, 7, 5, 3)])
def test_linear_is_the_plain_product(shape):
    """``linear`` computes ``W @ x + b`` (feature-major), single and stacked, width-1 outputs included."""
    torch.manual_seed(0)
    *lead, batch, n_in, n_out = shape
    x = torch.randn(*lead, n_in, batch)
    layer = Dense(torch.randn(*lead, n_out, n_in), torch.randn(*lead, n_out, 1))
    torch.testing.assert_close(linear(x, layer), layer.weight @ x + layer.bias)
    if lead:  # a shared [in, B] input goes to every member
        torch.testing.assert_close(linear(x[0], layer), layer.weight @ x[0] + layer.bias)


def _random_params(gen, sizes, members, flat_bias):
    """(w_0, b_0, ...) in float64: ``[out, in]`` / ``[n, out, in]`` weights; ``[out]`` biases (nn.Linear's)
    when ``flat_bias``, else ``[out, 1]`` / ``[n, out, 1]``."""
    lead = () if members is None else (members,)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append(torch.randn(*lead, b, a, generator=gen, dtype=torch.float64))
        bias_shape = (b,) if flat_bias and members is None else (*lead, b, 1)
        params.append(torch.randn(*bias_shape, generator=gen, dtype=torch.float64))
    return params


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.one_of(st.integers(1, 9), st.integers(15, 20)), min_size=2, max_size=4),
    batch=st.integers(1, 6),
    tanh=st.booleans(),
    members=st.sampled_from([None, 2, 3]),
    own_inputs=st.booleans(),
    flat_bias=st.booleans(),
    grad_input=st.booleans(),
    grad_params=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_function_matches_plain_autograd(sizes, batch, tanh, members, own_inputs, flat_bias, grad_input,
                                         grad_params, seed):
    """``mlp`` (the Function on the CPU) against the same network in plain autograd ops: outputs, and the
    gradients of every tensor that requires one -- and none for those that do not."""
    if not (grad_input or grad_params):
        grad_input = True
    gen = torch.Generator().manual_seed(seed)
    params = _random_params(gen, sizes, members, flat_bias)
    x_shape = (members, batch, sizes[0]) if members is not None and own_inputs else (batch, sizes[0])
    x = torch.randn(*x_shape, generator=gen, dtype=torch.float64)
    upstream = torch.randn(*((members,) if members else ()), batch, sizes[-1], generator=gen, dtype=torch.float64)

    def run(fn):
        xs = x.clone().requires_grad_(grad_input)
        ps = [p.clone().requires_grad_(grad_params) for p in params]
        out = fn(xs, ps, tanh)
        (out * upstream).sum().backward()
        return out.detach(), xs.grad, [p.grad for p in ps]

    out, gx, gp = run(mlp)
    ref_out, ref_gx, ref_gp = run(lambda x_, p_, t_: nnf.plain_mlp(x_, p_, "relu", "tanh" if t_ else None))
    torch.testing.assert_close(out, ref_out)
    assert out.shape == ref_out.shape
    if grad_input:
        torch.testing.assert_close(gx, ref_gx)
    else:
        assert gx is None
    for ours, ref in zip(gp, ref_gp):
        if grad_params:
            assert ours.shape == ref.shape
            torch.testing.assert_close(ours, ref)
        else:
            assert ours is None


def test_only_the_needed_products_are_computed(monkeypatch):
    """Frozen weights: no weight-gradient product at all; an input that needs no gradient: the first layer's
    input-gradient product is skipped (backward returns None for it)."""
    calls = []
    original = nnf._weight_gradient
    monkeypatch.setattr(nnf, "_weight_gradient", lambda *a: (calls.append(1), original(*a))[1])
    torch.manual_seed(0)
    params = [torch.randn(5, 3), torch.randn(5), torch.randn(1, 5), torch.randn(1)]
    x = torch.randn(4, 3, requires_grad=True)
    mlp(x, params).sum().backward()  # weights do not require grad
    assert calls == [] and x.grad is not None
    captured = {}
    original_backward = nnf.mlp_backward

    def spy(*args, **kwargs):
        captured.update(kwargs)
        return original_backward(*args, **kwargs)

    monkeypatch.setattr(nnf, "mlp_backward", spy)
    weights = [p.clone().requires_grad_() for p in params]
    mlp(torch.randn(4, 3), weights).sum().backward()  # the input does not require grad
    assert captured == dict(weight_grads=True, input_grad=False) and len(calls) == 2
    assert all(p.grad is not None for p in weights)


def test_no_function_without_gradients():
    """Under no_grad (or with nothing requiring grad) the kernels run directly: no graph, same values."""
    torch.manual_seed(0)
    params = [torch.randn(5, 3, requires_grad=True), torch.randn(5, requires_grad=True)]
    x = torch.randn(4, 3)
    with torch.no_grad():
        out = mlp(x, params, tanh_output=True)
    assert out.grad_fn is None
    torch.testing.assert_close(out, torch.tanh(x @ params[0].detach().t() + params[1].detach()))
    assert isinstance(mlp(x, params).grad_fn, FeatureMajorMLP._backward_cls)


def test_plain_path_off_the_cpu(monkeypatch):
    """Where fused_kernels_enabled is false (any device but the CPU), mlp records ordinary autograd ops."""
    monkeypatch.setattr(nnf, "fused_kernels_enabled", lambda device: False)
    torch.manual_seed(0)
    params = [torch.randn(2, 5, 3, requires_grad=True), torch.randn(2, 5, 1, requires_grad=True)]
    out = mlp(torch.randn(4, 3), params)
    assert out.shape == (2, 4, 5) and not isinstance(out.grad_fn, FeatureMajorMLP._backward_cls)
    assert nnf.fused_kernels_enabled.__name__ == "<lambda>"
    monkeypatch.undo()
    assert nnf.fused_kernels_enabled(torch.device("cpu")) and not nnf.fused_kernels_enabled(torch.device("meta"))


def test_updating_a_weight_before_backward_is_an_error():
    """The Function saves the weights version-checked: an optimizer step between forward and backward fails
    loudly instead of producing gradients of the wrong weights."""
    w = torch.randn(3, 2, requires_grad=True)
    out = mlp(torch.randn(4, 2), [w, torch.zeros(3)])
    with torch.no_grad():
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_kept_layers_and_expanded_upstream_gradients():
    """``mlp(..., layers=feature_major_layers(params))`` is the same function; an upstream gradient with zero
    strides (the backward of a mean) gives the same gradients as its contiguous copy."""
    torch.manual_seed(0)
    params = [torch.randn(2, 6, 3, requires_grad=True), torch.randn(2, 6, 1, requires_grad=True),
              torch.randn(2, 1, 6, requires_grad=True), torch.randn(2, 1, 1, requires_grad=True)]
    x = torch.randn(7, 3, requires_grad=True)
    layers = nnf.feature_major_layers(params)
    assert all(not t.requires_grad for layer in layers for t in layer)
    out = mlp(x, params, layers=layers)
    out.mean().backward()  # MeanBackward hands over an expanded gradient
    grads = [p.grad.clone() for p in [x, *params]]
    for p in [x, *params]:
        p.grad = None
    mlp(x, params).backward(torch.full((2, 7, 1), 1.0 / 14))
    for a, p in zip(grads, [x, *params]):
        torch.testing.assert_close(a, p.grad)
    with torch.no_grad():
        torch.testing.assert_close(mlp(x, params, layers=layers), out)
