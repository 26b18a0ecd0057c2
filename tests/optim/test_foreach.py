"""``rlearn.optim.foreach``: the private multi-tensor kernels pass their self-check on this torch, and with
them taken away every function runs the public per-tensor loop with bit-identical results."""

from __future__ import annotations

import pytest
import torch

from rlearn.optim import clip_grad_norm_, foreach, polyak_update_


@pytest.fixture
def fresh_check():
    foreach.available.cache_clear()
    yield
    foreach.available.cache_clear()


def _tensors(seed: int):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=gen) for shape in [(256, 4), (400,), (300, 400), (1, 300)]]


def _run_everything():
    """Every foreach function and the two helpers built on them, on fixed inputs."""
    targets, sources = _tensors(0), _tensors(1)
    out = {}
    lerped = [t.clone() for t in targets]
    foreach.lerp_(lerped, sources, 0.005)
    out["lerp"] = lerped
    copied = [t.clone() for t in targets]
    foreach.copy_(copied, sources)
    out["copy"] = copied
    out["norms"] = foreach.norms(sources)
    scaled = [t.clone() for t in targets]
    foreach.mul_(scaled, torch.tensor(0.37))
    out["mul"] = scaled
    polyak = [t.clone() for t in targets]
    polyak_update_(polyak, sources, 0.01)
    out["polyak"] = polyak
    params = [torch.nn.Parameter(t.clone()) for t in targets]
    for p, g in zip(params, sources):
        p.grad = g.clone() * 10
    out["clip_norm"] = [clip_grad_norm_(params, 1.0)]
    out["clipped"] = [p.grad for p in params]
    return out


def test_the_private_kernels_pass_on_this_torch(fresh_check):
    assert foreach.available() is True


@pytest.mark.parametrize("breakage", ["missing", "different"])
def test_without_the_private_kernels_every_function_gives_the_same_bits(fresh_check, monkeypatch, breakage):
    fast = _run_everything()
    foreach.available.cache_clear()
    if breakage == "missing":  # a torch release that renamed a kernel
        monkeypatch.delattr(torch, "_foreach_lerp_")
    else:  # a kernel under that name that computes something else
        monkeypatch.setattr(torch, "_foreach_mul_", lambda tensors, factor: torch._foreach_add_(tensors, factor))
    assert foreach.available() is False
    public = _run_everything()
    for key in fast:
        assert all(torch.equal(a, b) for a, b in zip(fast[key], public[key])), key
    assert public["lerp"][0].sub(_tensors(0)[0]).abs().max() > 0  # the public path did the work
