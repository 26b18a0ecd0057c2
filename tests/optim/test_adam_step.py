"""``AdamStep`` must leave parameters and optimizer state bit-for-bit where ``optimizer.step()`` would."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import rlearn.optim.adam_step as adam_step_module
from rlearn.optim import AdamStep, direct_step_ok, make_adam, polyak_update_


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))


def _set_grads(net: nn.Module, step: int) -> None:
    gen = torch.Generator().manual_seed(1000 + step)
    for p in net.parameters():
        p.grad = torch.randn(p.shape, generator=gen) if p.grad is None else p.grad.copy_(
            torch.randn(p.shape, generator=gen))


def _pair(**adam_kwargs):
    """Two identical nets with their own Adam: one stepped by .step(), one by AdamStep."""
    ref, fast = _net(), _net()
    kwargs = dict(lr=1e-2, fused=True, **adam_kwargs)
    ref_opt, fast_opt = torch.optim.Adam(ref.parameters(), **kwargs), torch.optim.Adam(fast.parameters(), **kwargs)
    return ref, ref_opt, fast, fast_opt, AdamStep(fast_opt)


def _step_both(ref: nn.Module, ref_opt, fast: nn.Module, fast_opt, step: AdamStep, iterations: range,
               check_each: bool = False) -> None:
    """The same gradients into both nets, then ``ref_opt.step()`` and ``step()``, for each of ``iterations``;
    ``check_each``: both must be identical after every step."""
    for i in iterations:
        _set_grads(ref, i)
        _set_grads(fast, i)
        ref_opt.step()
        step()
        if check_each:
            _assert_same(ref, ref_opt, fast, fast_opt)


def _assert_same(ref: nn.Module, ref_opt, fast: nn.Module, fast_opt) -> None:
    for a, b in zip(ref.parameters(), fast.parameters()):
        assert torch.equal(a, b)
    for a, b in zip(ref.parameters(), fast.parameters()):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(ref_opt.state[a][key], fast_opt.state[b][key]), key


@pytest.mark.parametrize("adam_kwargs", [{}, {"weight_decay": 0.1}, {"betas": (0.8, 0.95), "eps": 1e-6},
                                         {"weight_decay": 0.1, "decoupled_weight_decay": True}])
def test_matches_optimizer_step_exactly(adam_kwargs):
    if "decoupled_weight_decay" in adam_kwargs and "decoupled_weight_decay" not in torch.optim.Adam.__init__.__code__.co_varnames:
        pytest.skip("this torch's Adam has no decoupled_weight_decay")
    ref, ref_opt, fast, fast_opt, step = _pair(**adam_kwargs)
    _step_both(ref, ref_opt, fast, fast_opt, step, range(6), check_each=True)
    assert step.fallback_steps == 1 and step.direct_steps == 5  # only the first step (it creates the state)


def test_reads_the_learning_rate_at_every_step():
    ref, ref_opt, fast, fast_opt, step = _pair()
    for i in range(4):
        if i == 2:
            ref_opt.param_groups[0]["lr"] = fast_opt.param_groups[0]["lr"] = 3e-4
        _set_grads(ref, i)
        _set_grads(fast, i)
        ref_opt.step()
        step()
    _assert_same(ref, ref_opt, fast, fast_opt)
    assert step.direct_steps == 3


def test_rebuilds_after_load_state_dict_and_replaced_grads():
    ref, ref_opt, fast, fast_opt, step = _pair()
    _step_both(ref, ref_opt, fast, fast_opt, step, range(3))
    saved = copy.deepcopy(fast_opt.state_dict())
    fast_opt.load_state_dict(saved)  # new state tensors: the cached lists would update stale copies
    ref_opt.load_state_dict(copy.deepcopy(ref_opt.state_dict()))
    for net, opt in ((ref, ref_opt), (fast, fast_opt)):
        opt.zero_grad(set_to_none=True)
    _step_both(ref, ref_opt, fast, fast_opt, step, range(3, 6), check_each=True)
    assert step.fallback_steps == 2  # the first step and the one after load_state_dict / new grads


def test_a_parameter_without_gradient_is_skipped_like_step_does():
    ref, ref_opt, fast, fast_opt, step = _pair()
    for i in range(4):
        _set_grads(ref, i)
        _set_grads(fast, i)
        if i == 2:
            ref[2].bias.grad = None
            fast[2].bias.grad = None
        ref_opt.step()
        step()
        _assert_same(ref, ref_opt, fast, fast_opt)


def test_step_counts_are_one_tensor_viewed_per_parameter_and_survive_a_checkpoint(tmp_path):
    """The direct step counts every parameter's step with one ``add_`` on a shared 1-d tensor; each parameter
    keeps its own 0-d ``step`` entry (per-parameter state), a parameter skipped by a fallback ``step()`` keeps
    its own count, and ``state_dict`` through ``torch.save`` / ``torch.load`` continues bit for bit."""
    ref, ref_opt, fast, fast_opt, step = _pair()
    _step_both(ref, ref_opt, fast, fast_opt, step, range(3), check_each=True)
    counts = step._step_counts
    assert counts is not None and counts.shape == (4,) and counts.tolist() == [3.0] * 4
    entries = [fast_opt.state[p]["step"] for p in fast.parameters()]
    assert all(t.dim() == 0 and t.untyped_storage().data_ptr() == counts.untyped_storage().data_ptr()
               for t in entries)
    # a fallback step() with one gradient missing: that parameter's count stays, the others move on
    for net in (ref, fast):
        _set_grads(net, 3)
        net[2].bias.grad = None
    ref_opt.step()
    step()
    _assert_same(ref, ref_opt, fast, fast_opt)
    assert [float(fast_opt.state[p]["step"]) for p in fast.parameters()] == [4.0, 4.0, 4.0, 3.0]
    _step_both(ref, ref_opt, fast, fast_opt, step, range(4, 6), check_each=True)
    torch.save(fast_opt.state_dict(), tmp_path / "opt.pt")
    loaded = torch.optim.Adam(fast.parameters(), lr=1e-2, fused=True)
    loaded.load_state_dict(torch.load(tmp_path / "opt.pt"))
    again = AdamStep(loaded)
    _step_both(ref, ref_opt, fast, loaded, again, range(6, 9), check_each=True)
    assert again.direct_steps == 2 and [float(loaded.state[p]["step"]) for p in fast.parameters()] == [9.0] * 3 + [8.0]


def test_hooks_see_every_step():
    _, _, fast, fast_opt, step = _pair()
    calls = []
    handle = fast_opt.register_step_post_hook(lambda opt, args, kwargs: calls.append(1))
    for i in range(3):
        _set_grads(fast, i)
        step()
    assert len(calls) == 3 and step.direct_steps == 0  # a hook forces the real step()
    handle.remove()


def test_an_lr_schedulers_step_tracking_keeps_the_direct_step_exact():
    """A scheduler wraps ``step()`` only to record that it ran: the direct call records it too (no
    "lr_scheduler.step() before optimizer.step()" warning) and follows the scheduled learning rates."""
    ref, ref_opt, fast, fast_opt, step = _pair()
    schedulers = [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) for opt in (ref_opt, fast_opt)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(4):
            _set_grads(ref, i)
            _set_grads(fast, i)
            ref_opt.step()
            fast_opt._opt_called = False  # what the scheduler checks: set again by this step
            step()
            assert fast_opt._opt_called
            for scheduler in schedulers:
                scheduler.step()
    assert step.direct_steps == 3 and step.fallback_steps == 1  # the first step creates the state
    assert fast_opt.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5 ** 4)
    _assert_same(ref, ref_opt, fast, fast_opt)


def test_a_step_replaced_by_other_code_is_called():
    _, _, fast, fast_opt, step = _pair()
    calls = []
    original = fast_opt.step
    fast_opt.step = lambda *a, **k: (calls.append(1), original(*a, **k))[1]
    for i in range(3):
        _set_grads(fast, i)
        step()
    assert len(calls) == 3 and step.direct_steps == 0


@pytest.mark.parametrize("adam_kwargs", [{"fused": False}, {"amsgrad": True}, {"maximize": True}])
def test_other_configurations_use_step(adam_kwargs):
    ref, fast = _net(), _net()
    kwargs = dict(lr=1e-2, fused=True)
    kwargs.update(adam_kwargs)
    ref_opt, fast_opt = torch.optim.Adam(ref.parameters(), **kwargs), torch.optim.Adam(fast.parameters(), **kwargs)
    step = AdamStep(fast_opt)
    _step_both(ref, ref_opt, fast, fast_opt, step, range(3))
    assert step.direct_steps == 0 and step.fallback_steps == 3
    for a, b in zip(ref.parameters(), fast.parameters()):
        assert torch.equal(a, b)


def test_a_loaded_state_alone_forces_a_rebuild():
    """A loaded state (same .grad tensors) makes the cached lists stale: one step() rebuilds them."""
    ref, ref_opt, fast, fast_opt, step = _pair()
    _step_both(ref, ref_opt, fast, fast_opt, step, range(2))
    fast_opt.load_state_dict(copy.deepcopy(fast_opt.state_dict()))
    ref_opt.load_state_dict(copy.deepcopy(ref_opt.state_dict()))
    _step_both(ref, ref_opt, fast, fast_opt, step, range(2, 5), check_each=True)
    assert step.fallback_steps == 2 and step.direct_steps == 3


def test_replaced_grads_are_read_at_every_step_bit_for_bit():
    """New .grad tensors at every step (what backward() hands over after zero_grad() set them to None) need
    no rebuild: the direct step reads the current .grad of every parameter and stays exactly step()."""
    ref, ref_opt, fast, fast_opt, step = _pair()
    for i in range(6):
        for net in (ref, fast):
            for p in net.parameters():
                p.grad = None
        _set_grads(ref, i)
        _set_grads(fast, i)  # fresh tensors: p.grad was None
        ref_opt.step()
        step()
        _assert_same(ref, ref_opt, fast, fast_opt)
    assert step.fallback_steps == 1 and step.direct_steps == 5
    fast[0].weight.grad = torch.zeros_like(fast[0].weight)  # one replaced .grad alone: still direct
    ref[0].weight.grad = torch.zeros_like(ref[0].weight)
    ref_opt.step()
    step()
    _assert_same(ref, ref_opt, fast, fast_opt)
    assert step.fallback_steps == 1 and step.direct_steps == 6


def test_zero_grad_backward_step_matches_the_optimizer_with_real_backward():
    """The way policies use it: zero_grad(), loss.backward(), step() against the optimizer's own calls."""
    ref, ref_opt, fast, fast_opt, step = _pair(weight_decay=0.01)
    gen = torch.Generator().manual_seed(7)
    for i in range(5):
        x = torch.randn(8, 5, generator=gen)
        ref_opt.zero_grad()
        ref(x).square().mean().backward()
        ref_opt.step()
        step.zero_grad()
        assert all(p.grad is None for p in fast.parameters())
        fast(x).square().mean().backward()
        step()
        _assert_same(ref, ref_opt, fast, fast_opt)
    assert step.fallback_steps == 1 and step.direct_steps == 4


# ------------------------------------------------------------------------------- start-up self-check
@pytest.fixture
def fresh_check():
    """direct_step_ok() runs once per process: clear its cache around a test that changes torch."""
    direct_step_ok.cache_clear()
    yield
    direct_step_ok.cache_clear()


def test_self_check_passes_on_this_torch(fresh_check):
    assert direct_step_ok() is True
    assert AdamStep(torch.optim.Adam(_net().parameters(), fused=True)).direct


@pytest.mark.parametrize("breakage", ["missing", "different"])
def test_a_failed_self_check_falls_back_to_step(fresh_check, monkeypatch, breakage):
    """Private kernel missing, or computing something else than step(): every AdamStep calls step()."""
    # a torch release that renamed the kernel, or whose kernel under that name computes something else
    names = ("_no_such_kernel_", "_fused_adamw_") if breakage == "missing" else ("_fused_adamw_", "_fused_adamw_")
    monkeypatch.setattr(adam_step_module, "_KERNEL_NAMES", names)
    assert direct_step_ok() is False
    ref, ref_opt, fast, fast_opt, step = _pair()
    assert not step.direct
    _step_both(ref, ref_opt, fast, fast_opt, step, range(4), check_each=True)
    assert step.direct_steps == 0 and step.fallback_steps == 4


def test_zero_grad_sets_the_grads_to_none():
    ref, ref_opt, fast, fast_opt, step = _pair()
    _step_both(ref, ref_opt, fast, fast_opt, step, range(2))
    step.zero_grad()  # valid lists: the cached parameters' .grad = None
    assert all(p.grad is None for p in fast.parameters())
    _step_both(ref, ref_opt, fast, fast_opt, step, range(2, 4), check_each=True)
    assert step.fallback_steps == 1 and step.direct_steps == 3
    fresh = AdamStep(torch.optim.Adam(_net().parameters(), lr=1e-2, fused=True))
    params = fresh.optimizer.param_groups[0]["params"]
    for p in params:
        p.grad = torch.ones_like(p)
    fresh.zero_grad()  # no lists yet: the optimizer's own zero_grad(set_to_none=True)
    assert all(p.grad is None for p in params)


# ------------------------------------------------------------------------------------- fused or not
def test_make_adam_is_fused_and_steps_directly():
    opt = make_adam(_net().parameters(), lr=1e-3)
    assert opt.param_groups[0]["fused"] is True and opt.param_groups[0]["lr"] == 1e-3
    ref, fast = _net(), _net()
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2, fused=True)
    fast_opt = make_adam(fast.parameters(), lr=1e-2)
    step = AdamStep(fast_opt)
    _step_both(ref, ref_opt, fast, fast_opt, step, range(3), check_each=True)
    assert step.direct_steps == 2


def test_polyak_update_is_the_formula():
    gen = torch.Generator().manual_seed(0)
    targets = [torch.randn(3, 4, generator=gen), torch.randn(5, generator=gen)]
    sources = [torch.randn(3, 4, generator=gen), torch.randn(5, generator=gen)]
    expected = [t + 0.1 * (s - t) for t, s in zip(targets, sources)]
    polyak_update_(targets, sources, 0.1)
    for t, e in zip(targets, expected):
        torch.testing.assert_close(t, e)
    with pytest.raises(ValueError, match="2 targets but 1 sources"):
        polyak_update_(targets, sources[:1], 0.1)


def test_a_step_hook_the_detection_cannot_see_disables_the_direct_path(fresh_check, monkeypatch):
    """A torch release that renames the attribute holding an optimizer's step hooks would make the direct
    path skip them (DDP's gradient averaging is a step pre-hook): the self-check registers hooks through the
    public API, sees that they go undetected, and every step then runs through step() with its hooks."""
    monkeypatch.setattr(adam_step_module, "_has_step_hooks", lambda opt: bool(getattr(opt, "_renamed_hooks", None)))
    assert direct_step_ok() is False
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    averaged = []
    opt.register_step_pre_hook(lambda optimizer, args, kwargs: averaged.append(1))
    step = AdamStep(opt)
    for _ in range(4):
        step.zero_grad()
        net(torch.ones(2, 5)).sum().backward()
        step.step()
    assert len(averaged) == 4 and step.direct_steps == 0 and step.fallback_steps == 4


@pytest.mark.parametrize("kind", ["pre", "post", "global_pre", "global_post"])
def test_every_kind_of_step_hook_runs_under_the_direct_path(fresh_check, kind):
    """With the self-check passed, a registered hook of each kind is seen: the step goes through step()."""
    from torch.optim import optimizer as optimizer_module

    assert direct_step_ok() is True
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    register = {"pre": opt.register_step_pre_hook, "post": opt.register_step_post_hook,
                "global_pre": optimizer_module.register_optimizer_step_pre_hook,
                "global_post": optimizer_module.register_optimizer_step_post_hook}[kind]
    calls = []
    step = AdamStep(opt)
    handle = register(lambda *args: calls.append(1))
    try:
        for _ in range(3):
            step.zero_grad()
            net(torch.ones(2, 5)).sum().backward()
            step.step()
    finally:
        handle.remove()
    assert len(calls) == 3 and step.direct_steps == 0
