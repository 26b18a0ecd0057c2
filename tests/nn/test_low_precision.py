"""rlearn.nn.low_precision: bf16 products with fp32 parameters, against float64 plain autograd."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rlearn.nn.functional as nnf
import rlearn.nn.low_precision as lp
from rlearn.nn.low_precision import LowPrecisionLayers, mlp_low_precision

# bf16 keeps 8 mantissa bits: every rounding is within 2^-8 relative; a few layers of them stay within a few %
# of the scale of the result (a wrong transpose, a missing activation or gradient term is off by ~100 %)
REL = 0.05


def _close(ours: torch.Tensor, ref: torch.Tensor) -> None:
    assert ours.shape == ref.shape
    scale = ref.abs().max().item() + 1e-3
    err = (ours.double() - ref).abs().max().item()
    assert err <= REL * scale, f"max error {err:.4g} against scale {scale:.4g}"


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
    out = mlp_low_precision(xs, ps, tanh, LowPrecisionLayers())
    assert out.dtype == torch.float32
    (out * upstream).sum().backward()

    rx = x.double().requires_grad_(grad_input)
    rp = [p.double().requires_grad_(grad_params) for p in params]
    ref = nnf._plain_mlp(rx, rp, tanh)
    (ref * upstream.double()).sum().backward()

    _close(out.detach(), ref.detach())
    if grad_input:
        assert xs.grad.dtype == torch.float32
        _close(xs.grad, rx.grad)
    else:
        assert xs.grad is None
    for ours, theirs in zip(ps, rp):
        if grad_params:
            assert ours.grad.dtype == torch.float32 and ours.grad.shape == ours.shape
            _close(ours.grad, theirs.grad)
        else:
            assert ours.grad is None


def test_the_products_really_run_in_bf16():
    """Not a silent fp32 path: the copies are bf16 and the result differs from the fp32 kernels' by bf16
    rounding (but stays close)."""
    gen = torch.Generator().manual_seed(0)
    params = _params(gen, [8, 32, 32, 1], members=2)
    x = torch.randn(16, 8, generator=gen)
    copies = LowPrecisionLayers()
    ours = mlp_low_precision(x, params, False, copies)
    fp32 = nnf.mlp(x, params, False)
    assert all(layer.weight.dtype == torch.bfloat16 for layer in copies.layers(params))
    assert not torch.equal(ours, fp32)
    _close(ours, fp32.double())


def test_copies_are_cast_once_and_follow_in_place_updates():
    gen = torch.Generator().manual_seed(1)
    params = [p.requires_grad_() for p in _params(gen, [4, 8, 2], members=None)]
    copies = LowPrecisionLayers()
    first = copies.layers(params)
    assert copies.layers(params) is first  # unchanged parameters: no new cast
    with torch.no_grad():
        params[0].add_(1.0)  # an optimizer step or a Polyak update writes in place
    second = copies.layers(params)
    assert second is not first
    torch.testing.assert_close(second[0].weight.float(), params[0].detach(), atol=0.02, rtol=0.01)
    replaced = [p.detach().clone().requires_grad_() for p in params]  # other tensors: cast again
    assert copies.layers(replaced) is not second


def test_updating_a_parameter_before_backward_is_an_error():
    gen = torch.Generator().manual_seed(2)
    params = [p.requires_grad_() for p in _params(gen, [3, 5, 1], members=None)]
    out = mlp_low_precision(torch.randn(4, 3, generator=gen), params, False, LowPrecisionLayers())
    with torch.no_grad():
        params[2].mul_(0.5)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("grad", [True, False])
def test_one_member_alone_is_that_row_of_the_ensemble(grad):
    gen = torch.Generator().manual_seed(3)
    params = [p.requires_grad_(grad) for p in _params(gen, [5, 16, 1], members=2)]
    x = torch.randn(7, 5, generator=gen)
    copies = LowPrecisionLayers()
    both = mlp_low_precision(x, params, False, copies)
    for i in range(2):
        alone = mlp_low_precision(x, params, False, copies, member=i)
        torch.testing.assert_close(alone, both[i])
    if grad:
        mlp_low_precision(x, params, False, copies, member=1).sum().backward()
        assert params[0].grad[0].abs().sum() == 0 and params[0].grad[1].abs().sum() > 0


def test_without_gradients_no_graph_and_the_same_output():
    gen = torch.Generator().manual_seed(4)
    params = [p.requires_grad_() for p in _params(gen, [6, 12, 3], members=None)]
    x = torch.randn(5, 6, generator=gen)
    copies = LowPrecisionLayers()
    with torch.no_grad():
        plain = mlp_low_precision(x, params, True, copies)
    assert plain.grad_fn is None
    torch.testing.assert_close(plain, mlp_low_precision(x, params, True, copies).detach())


def test_off_the_cpu_path_runs_under_autocast(monkeypatch):
    monkeypatch.setattr(lp, "fused_kernels_enabled", lambda device: False)
    gen = torch.Generator().manual_seed(5)
    params = [p.requires_grad_() for p in _params(gen, [4, 8, 1], members=2)]
    x = torch.randn(6, 4, generator=gen)
    out = mlp_low_precision(x, params, False, LowPrecisionLayers())
    assert out.dtype == torch.float32
    out.sum().backward()
    assert params[0].grad.dtype == torch.float32
    ref = nnf._plain_mlp(x.double(), [p.detach().double() for p in params], False)
    _close(out.detach(), ref)
