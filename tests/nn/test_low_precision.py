"""rlearn.nn.low_precision: bf16 products with fp32 parameters, against float64 plain autograd."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rlearn.nn.functional as nnf
import rlearn.nn.low_precision as lp
from rlearn.nn.low_precision import low_precision_layers, mlp_low_precision

# bf16 keeps 8 mantissa bits (unit roundoff 2^-9): each rounded value is within 0.2 % of itself. A result that
# sums many rounded terms is within a few roundoffs per layer of the *sum of the terms' magnitudes* (which can be
# far above the result when the terms cancel), so each element is compared with that bound: the same network
# run on |x|, |weights|, |biases| without activations (every path counted) and differentiated against |upstream|.
REL = 0.06  # about 30 roundoffs: a few per rounded quantity on a path of up to 4 layers


def _close(ours: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor) -> None:
    assert ours.shape == ref.shape == bound.shape
    excess = (ours.double() - ref).abs() - REL * bound - 1e-6
    assert excess.max().item() <= 0, f"error beyond bf16 rounding: {excess.max().item():.4g}"


def _bf16(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to bf16, back in ``t``'s dtype (the gradient passes through unchanged)."""
    return t.to(torch.bfloat16).to(t.dtype)


def _rounded_reference(x, params, tanh):
    """The network in float64 with the kernels' roundings to bf16: the input, every weight and bias and every
    layer's result, so that each ReLU sees the same sign as in the bf16 kernels (rounding never flips a sign;
    without this a pre-activation within rounding of 0 switches a gradient path on or off)."""
    h = _bf16(x)
    last = len(params) // 2 - 1
    for i, (w, b) in enumerate(zip(params[0::2], params[1::2])):
        w, b = _bf16(w), _bf16(b)
        if w.dim() == 3:
            h = torch.baddbmm(b.transpose(-1, -2), h.expand(w.shape[0], -1, -1) if h.dim() == 2 else h,
                              w.transpose(-1, -2))
        else:
            h = h @ w.t() + b.reshape(-1)
        h = _bf16(h)
        if i < last:
            h = torch.relu(h)
        elif tanh:
            h = _bf16(torch.tanh(h))
    return h


def _magnitudes(x, params, upstream, grad_input, grad_params):
    """Per element: the output's and every gradient's sum of term magnitudes (see REL)."""
    ax = x.double().abs().requires_grad_(grad_input)
    ap = [p.double().abs().requires_grad_(grad_params) for p in params]
    h = ax
    for w, b in zip(ap[0::2], ap[1::2]):
        h = torch.baddbmm(b.transpose(-1, -2), h.expand(w.shape[0], -1, -1) if h.dim() == 2 else h,
                          w.transpose(-1, -2)) if w.dim() == 3 else h @ w.t() + b.reshape(-1)
    (h * upstream.double().abs()).sum().backward()
    return h.detach(), ax.grad, [p.grad for p in ap]


def _params(gen, sizes, members):
    lead = () if members is None else (members,)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append(torch.randn(*lead, b, a, generator=gen) / a ** 0.5)
        params.append(torch.randn(*lead, b, 1, generator=gen) * 0.1)
    return params


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 24), min_size=2, max_size=4),
    batch=st.integers(1, 12),
    tanh=st.booleans(),
    members=st.sampled_from([None, 2, 3]),
    own_inputs=st.booleans(),
    grad_input=st.booleans(),
    grad_params=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_matches_float64_autograd_within_bf16_rounding(sizes, batch, tanh, members, own_inputs, grad_input,
                                                        grad_params, seed):
    """Outputs and every requested gradient within bf16 rounding of float64 plain autograd; gradients come
    back in the parameters' dtype (fp32) and only for tensors that require one."""
    if not (grad_input or grad_params):
        grad_input = True
    gen = torch.Generator().manual_seed(seed)
    params = _params(gen, sizes, members)
    x_shape = (members, batch, sizes[0]) if members is not None and own_inputs else (batch, sizes[0])
    x = torch.randn(*x_shape, generator=gen)
    upstream = torch.randn(*((members,) if members else ()), batch, sizes[-1], generator=gen)

    xs = x.clone().requires_grad_(grad_input)
    ps = [p.clone().requires_grad_(grad_params) for p in params]
    out = mlp_low_precision(xs, ps, tanh)
    assert out.dtype == torch.float32
    (out * upstream).sum().backward()

    rx = x.double().requires_grad_(grad_input)
    rp = [p.double().requires_grad_(grad_params) for p in params]
    ref = _rounded_reference(rx, rp, tanh)
    (ref * upstream.double()).sum().backward()

    bound_out, bound_x, bound_p = _magnitudes(x, params, upstream, grad_input, grad_params)
    _close(out.detach(), ref.detach(), bound_out)
    if grad_input:
        assert xs.grad.dtype == torch.float32
        _close(xs.grad, rx.grad, bound_x)
    else:
        assert xs.grad is None
    for ours, theirs, bound in zip(ps, rp, bound_p):
        if grad_params:
            assert ours.grad.dtype == torch.float32 and ours.grad.shape == ours.shape
            _close(ours.grad, theirs.grad, bound)
        else:
            assert ours.grad is None


def test_the_products_really_run_in_bf16():
    """Not a silent fp32 path: the copies are bf16 and the result differs from the fp32 kernels' by bf16
    rounding (but stays close)."""
    gen = torch.Generator().manual_seed(0)
    params = _params(gen, [8, 32, 32, 1], members=2)
    x = torch.randn(16, 8, generator=gen)
    ours = mlp_low_precision(x, params, False)
    fp32 = nnf.mlp(x, params, False)
    assert all(layer.weight.dtype == torch.bfloat16 for layer in low_precision_layers(params, torch.bfloat16))
    assert not torch.equal(ours, fp32)
    torch.testing.assert_close(ours, fp32, rtol=0.05, atol=0.02)


@pytest.mark.parametrize("direct", [True, False])
def test_forwards_follow_optimizer_steps(direct):
    """Optimizer steps update parameters in place without bumping their version counters (a cache keyed on
    them kept computing with the initial weights: bf16 TD3 did not learn). Every forward uses the weights as
    they are now: after each step the bf16 output follows the fp32 network's."""
    from rlearn.nn import MLP
    from rlearn.optim import AdamStep, make_adam

    torch.manual_seed(0)
    net = MLP([4, 16, 2]).set_compute_dtype("bf16")
    x = torch.randn(8, 4)
    adam = AdamStep(make_adam(net.parameters(), lr=0.05))
    before = net(x).detach()
    for _ in range(3):
        adam.zero_grad()
        net(x).square().mean().backward()
        adam.step() if direct else adam.optimizer.step()
        with torch.no_grad():
            fp32 = nnf.mlp(x, net.parameter_list(), False)
        torch.testing.assert_close(net(x).detach(), fp32, rtol=0.05, atol=0.02)
    assert not torch.allclose(net(x).detach(), before, atol=0.05)
    with torch.inference_mode():  # acting between steps sees the latest weights too
        torch.testing.assert_close(net(x), nnf.mlp(x, net.parameter_list(), False), rtol=0.05, atol=0.02)


def test_updating_a_parameter_before_backward_is_an_error():
    gen = torch.Generator().manual_seed(2)
    params = [p.requires_grad_() for p in _params(gen, [3, 5, 1], members=None)]
    out = mlp_low_precision(torch.randn(4, 3, generator=gen), params, False)
    with torch.no_grad():
        params[2].mul_(0.5)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("grad", [True, False])
def test_one_member_alone_is_that_row_of_the_ensemble(grad):
    gen = torch.Generator().manual_seed(3)
    params = [p.requires_grad_(grad) for p in _params(gen, [5, 16, 1], members=2)]
    x = torch.randn(7, 5, generator=gen)
    both = mlp_low_precision(x, params, False)
    for i in range(2):
        alone = mlp_low_precision(x, params, False, member=i)
        torch.testing.assert_close(alone, both[i])
    if grad:
        mlp_low_precision(x, params, False, member=1).sum().backward()
        assert params[0].grad[0].abs().sum() == 0 and params[0].grad[1].abs().sum() > 0


def test_without_gradients_no_graph_and_the_same_output():
    gen = torch.Generator().manual_seed(4)
    params = [p.requires_grad_() for p in _params(gen, [6, 12, 3], members=None)]
    x = torch.randn(5, 6, generator=gen)
    with torch.no_grad():
        plain = mlp_low_precision(x, params, True)
    assert plain.grad_fn is None
    torch.testing.assert_close(plain, mlp_low_precision(x, params, True).detach())


def test_off_the_cpu_path_runs_under_autocast(monkeypatch):
    monkeypatch.setattr(lp, "fused_kernels_enabled", lambda device: False)
    gen = torch.Generator().manual_seed(5)
    params = [p.requires_grad_() for p in _params(gen, [4, 8, 1], members=2)]
    x = torch.randn(6, 4, generator=gen)
    out = mlp_low_precision(x, params, False)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert params[0].grad.dtype == torch.float32
    ref = nnf.plain_mlp(x, [p.detach() for p in params])
    torch.testing.assert_close(out.detach(), ref, rtol=0.05, atol=0.02)


# ------------------------------------------------------------------------------------------ modules
def test_modules_switch_to_bf16_and_back():
    from rlearn.nn import MLP, QEnsemble

    torch.manual_seed(0)
    q = QEnsemble(3, 1, [32, 32])
    obs, act = torch.randn(16, 3), torch.randn(16, 1)
    fp32 = q(obs, act)
    assert q.set_compute_dtype("bf16") is q and q.compute_dtype == torch.bfloat16
    low = q(obs, act)
    assert low.dtype == torch.float32 and not torch.equal(low, fp32)
    torch.testing.assert_close(low, fp32, rtol=0.05, atol=0.02)
    torch.testing.assert_close(q(obs, act, member=1), low[1])
    assert all(v.dtype == torch.float32 for v in q.state_dict().values())  # checkpoints unchanged
    q.set_compute_dtype("fp32")
    assert torch.equal(q(obs, act), fp32)  # back to the exact fp32 path
    m = MLP([3, 8, 2], output_activation="tanh").set_compute_dtype(torch.bfloat16)
    assert m(obs).shape == (16, 2)
    for bad in ("fp16", torch.float16, 3):
        with pytest.raises(ValueError, match="compute dtype"):
            q.set_compute_dtype(bad)


def test_bf16_module_copies_are_its_own_and_frozen_still_skips_weight_gradients(monkeypatch):
    import copy

    from rlearn.nn import QEnsemble, frozen

    torch.manual_seed(1)
    q = QEnsemble(3, 1, [16, 16]).set_compute_dtype("bf16")
    target = copy.deepcopy(q)
    assert target.compute_dtype == torch.bfloat16
    obs, act = torch.randn(8, 3), torch.randn(8, 1, requires_grad=True)
    q(obs, act)
    with torch.no_grad():
        for p in target.parameters():
            p.mul_(0.5)
    # the target computes with its own, updated weights
    torch.testing.assert_close(target(obs, act), copy.deepcopy(target).set_compute_dtype("fp32")(obs, act),
                               rtol=0.05, atol=0.02)
    assert not torch.allclose(target(obs, act), q(obs, act))
    calls = []
    real = nnf.mlp_backward  # the bf16 products run through the same Function and kernels
    monkeypatch.setattr(nnf, "mlp_backward", lambda *a, **k: calls.append(k) or real(*a, **k))
    with frozen(q):
        q(obs, act, member=0).sum().backward()
    assert calls and calls[0]["weight_grads"] is False and act.grad is not None
    assert all(p.grad is None for p in q.parameters())
