"""``rlearn.optim.clip_grad_norm_`` must return the norm and leave the gradients bit for bit where
``torch.nn.utils.clip_grad_norm_`` does: random shapes and scales, every ``max_norm`` regime, missing, zero
and non-finite gradients, and the inputs it hands over to torch's function."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlearn.optim import clip_grad_norm_


def _params(shapes, seed: int, scale: float = 1.0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.zeros(shape, dtype=dtype)) for shape in shapes]
    for p in params:
        p.grad = (torch.randn(p.shape, generator=gen) * scale).to(dtype)
    return params


def _twins(params):
    """A deep copy of ``params`` with their gradients (None stays None)."""
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for p, q in zip(params, twins):
        q.grad = None if p.grad is None else p.grad.clone()
    return twins


def _assert_same(mine, ref):
    assert len(mine) == len(ref)
    for p, q in zip(mine, ref):
        if q.grad is None:
            assert p.grad is None
        else:
            assert torch.equal(p.grad, q.grad) or torch.allclose(p.grad, q.grad, rtol=0, atol=0, equal_nan=True)


def _compare(params, max_norm):
    twins = _twins(params)
    ref = torch.nn.utils.clip_grad_norm_(twins, max_norm)
    mine = clip_grad_norm_(params, max_norm)
    assert mine.shape == () and mine.dtype == ref.dtype and mine.device == ref.device
    assert torch.equal(mine, ref) or (math.isnan(float(mine)) and math.isnan(float(ref)))
    _assert_same(params, twins)
    return mine


shapes = st.lists(st.lists(st.integers(1, 7), min_size=0, max_size=3).map(tuple), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(shapes=shapes, seed=st.integers(0, 10_000), scale=st.sampled_from([1e-8, 1e-3, 1.0, 50.0, 1e6]),
       max_norm=st.sampled_from([1e-4, 0.5, 1.0, 10.0, 1e9, math.inf]), drop=st.integers(0, 7))
def test_matches_torch_bit_for_bit(shapes, seed, scale, max_norm, drop):
    params = _params(shapes, seed, scale)
    if drop < len(params):
        params[drop].grad = None  # a parameter without gradient is skipped, as in torch
    _compare(params, max_norm)


def test_clipping_happens_and_returns_the_norm_before_clipping():
    params = _params([(3, 4), (4,)], seed=1, scale=10.0)
    expected = math.sqrt(sum(float(p.grad.square().sum()) for p in params))
    norm = _compare(params, 1.0)
    assert float(norm) == pytest.approx(expected, rel=1e-6)
    after = math.sqrt(sum(float(p.grad.square().sum()) for p in params))
    assert after == pytest.approx(1.0, rel=1e-5)


def test_infinite_max_norm_leaves_gradients_unchanged():
    params = _params([(5, 2), (2,)], seed=2, scale=3.0)
    before = [p.grad.clone() for p in params]
    _compare(params, math.inf)
    assert all(torch.equal(p.grad, b) for p, b in zip(params, before))


def test_zero_gradients_stay_zero_and_norm_zero():
    params = _params([(3, 3), (3,)], seed=3, scale=0.0)
    assert float(_compare(params, 1.0)) == 0.0
    assert all(not p.grad.any() for p in params)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("max_norm", [1.0, math.inf])
def test_non_finite_gradients_behave_as_in_torch(bad, max_norm):
    """An inf norm scales by 0 (the inf entry becomes NaN), a NaN norm by NaN; the norm comes back as it is."""
    params = _params([(2, 3), (3,)], seed=4)
    params[0].grad[1, 2] = bad
    norm = _compare(params, max_norm)
    assert not math.isfinite(float(norm))
    if math.isinf(bad) and math.isfinite(max_norm):
        assert torch.isnan(params[0].grad[1, 2]) and not params[1].grad.any()  # 0 * inf, 0 * finite


def test_no_gradients_at_all_and_accepted_input_forms():
    assert torch.equal(clip_grad_norm_([torch.nn.Parameter(torch.ones(2))], 1.0), torch.tensor(0.0))
    assert torch.equal(clip_grad_norm_([], 1.0), torch.tensor(0.0))
    single = _params([(4,)], seed=5, scale=5.0)[0]
    twin = _twins([single])[0]
    assert torch.equal(clip_grad_norm_(single, 1.0), torch.nn.utils.clip_grad_norm_(twin, 1.0))
    assert torch.equal(single.grad, twin.grad)
    params = _params([(2, 2), (2,)], seed=6, scale=5.0)
    twins = _twins(params)
    assert torch.equal(clip_grad_norm_(iter(params), 1.0), torch.nn.utils.clip_grad_norm_(twins, 1.0))
    _assert_same(params, twins)


def test_mixed_dtypes_and_sparse_gradients_go_to_torch():
    params = _params([(3, 2), (2,)], seed=7, scale=4.0)
    params[1] = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    params[1].grad = torch.tensor([3.0, -4.0], dtype=torch.float64)
    _compare(params, 1.0)

    # sparse gradients: whatever torch's function does with them (this torch: raises), ours does too
    sparse = torch.nn.Parameter(torch.zeros(4, 3))
    sparse.grad = torch.sparse_coo_tensor([[0, 2]], torch.tensor([[1.0, 2.0, 2.0], [0.0, 3.0, 4.0]]), (4, 3),
                                          check_invariants=True)
    twin = torch.nn.Parameter(torch.zeros(4, 3))
    twin.grad = sparse.grad.clone()
    try:
        ref = torch.nn.utils.clip_grad_norm_([twin], 1.0)
    except Exception as error:  # noqa: BLE001 -- the same exception type is the contract
        with pytest.raises(type(error)):
            clip_grad_norm_([sparse], 1.0)
    else:
        assert torch.equal(clip_grad_norm_([sparse], 1.0), ref)
        assert torch.equal(sparse.grad.to_dense(), twin.grad.to_dense())


def test_gradients_that_require_grad_are_clipped_without_recording_a_graph():
    params = _params([(3,)], seed=8, scale=5.0)
    params[0].grad.requires_grad_(True)
    clip_grad_norm_(params, 1.0)
    assert params[0].grad.grad_fn is None


def test_cpu_skips_the_multiplication_only_when_the_coefficient_is_one(monkeypatch):
    calls = []
    real = torch._foreach_mul_

    def ours(params, max_norm):
        twins = _twins(params)
        ref = torch.nn.utils.clip_grad_norm_(twins, max_norm)
        calls.clear()  # count the multiplications of ours only
        mine = clip_grad_norm_(params, max_norm)
        assert torch.equal(mine, ref) or (math.isnan(float(mine)) and math.isnan(float(ref)))
        _assert_same(params, twins)

    monkeypatch.setattr(torch, "_foreach_mul_", lambda grads, coef: calls.append(float(coef)) or real(grads, coef))
    params = _params([(3, 3)], seed=9, scale=1.0)
    ours(params, 1e9)  # coefficient 1: nothing to do
    assert calls == []
    ours(params, 0.5)  # clipping: one multiplication by the coefficient
    assert len(calls) == 1 and 0 < calls[0] < 1
    params[0].grad[0, 0] = math.nan
    ours(params, 1e9)  # a NaN coefficient is applied, as torch applies it
    assert len(calls) == 1 and math.isnan(calls[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_limits_around_the_norm_match_torch_bit_for_bit(dtype):
    """Limits from just below to just above the norm (steps of 1e-7 relative, the clamp's boundary and the
    skip's margin): the same gradients and norm as torch in every dtype."""
    base = _params([(4, 3), (3,)], seed=12, scale=2.0, dtype=dtype)
    norm = float(torch.nn.utils.clip_grad_norm_(_twins(base), math.inf))
    for k in [*range(-30, 31), *range(80, 121), 200, 1000]:
        params = _twins(base)
        _compare(params, norm * (1 + k * 1e-7))
    for limit in (norm, norm + 1e-6, norm - 1e-6, float(torch.tensor(norm, dtype=dtype)) * 1.001):
        _compare(_twins(base), limit)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("max_norm", [0.5, 1e9])
def test_matches_torch_on_cuda(max_norm):
    params = [torch.nn.Parameter(p.detach().cuda()) for p in _params([(7, 5), (5,)], seed=10, scale=3.0)]
    gen = torch.Generator().manual_seed(11)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).cuda()
    norm = _compare(params, max_norm)
    assert norm.is_cuda
