"""``AdamStep``: ``optimizer.step()`` of a fused ``torch.optim.Adam`` without its per-call Python overhead.

It collects the fused kernel's argument lists once and calls ``torch._fused_adam_`` directly (the same kernel,
the same arguments: bit for bit ``optimizer.step()``). Wherever the shortcut could differ (no state yet, a
parameter without ``.grad``, a step hook, ``step()`` replaced, anything but one param group of plain fused Adam)
it calls ``step()``, as it does everywhere if :func:`direct_step_ok` fails. See docs/speed-parts.md.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, List, Optional, Tuple

import torch
from torch.optim import optimizer as _optimizer_module

__all__ = ["AdamStep", "make_adam", "direct_step_ok"]

_STATE_KEYS = ("exp_avg", "exp_avg_sq", "step")
#: the private torch kernels the direct step calls: (Adam, AdamW-style decoupled weight decay)
_KERNEL_NAMES = ("_fused_adam_", "_fused_adamw_")


def _no_global_hooks() -> bool:
    """No optimizer step hook registered for every optimizer (``register_optimizer_step_pre_hook``...)."""
    return not (getattr(_optimizer_module, "_global_optimizer_pre_hooks", None)
                or getattr(_optimizer_module, "_global_optimizer_post_hooks", None))


def _has_step_hooks(opt: torch.optim.Optimizer) -> bool:
    """A step pre- or post-hook is registered on ``opt`` (``register_step_pre_hook``...)."""
    return bool(getattr(opt, "_optimizer_step_pre_hooks", None) or getattr(opt, "_optimizer_step_post_hooks", None))


def _hooks_detected() -> bool:
    """Every kind of public step hook is seen while registered (not after removal) and runs when
    :class:`AdamStep` steps."""
    calls: List[str] = []
    param = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([param], lr=1e-2, fused=True)
    fast = AdamStep(opt, _checked=True)
    registrations = [
        ("pre", opt.register_step_pre_hook, lambda: _has_step_hooks(opt)),
        ("post", opt.register_step_post_hook, lambda: _has_step_hooks(opt)),
        ("global pre", _optimizer_module.register_optimizer_step_pre_hook, lambda: not _no_global_hooks()),
        ("global post", _optimizer_module.register_optimizer_step_post_hook, lambda: not _no_global_hooks()),
    ]
    for step_number, (kind, register, seen) in enumerate(registrations):
        already = seen()  # a global hook of the user's may be there already: then only "seen" is checked
        handle = register(lambda *args, kind=kind: calls.append(kind))
        try:
            param.grad = torch.ones(3)
            fast.step()  # the first call creates the state through step(); later ones must see the hook
            if not seen() or calls[-1:] != [kind]:
                return False
        finally:
            handle.remove()
        if seen() and not already:
            return False
    return len(calls) == len(registrations)


def make_adam(params: Iterable[torch.nn.Parameter], lr: float, device: torch.device | str = "cpu",
              **kwargs: Any) -> torch.optim.Adam:
    """``torch.optim.Adam(params, lr, **kwargs)``, fused: one kernel for every parameter, on every device
    (``device``: where the parameters live)."""
    return torch.optim.Adam(params, lr=lr, fused=True, **kwargs)


@functools.lru_cache(maxsize=None)
def direct_step_ok() -> bool:
    """Once per process: does the direct fused call reproduce ``optimizer.step()`` bit for bit (three steps), and
    are public step hooks detected and run?"""
    if not all(hasattr(torch, name) for name in (*_KERNEL_NAMES, "_foreach_add_")):
        return False
    try:
        if not _hooks_detected():
            return False
        gen = torch.Generator().manual_seed(0)
        ref = torch.nn.Parameter(torch.randn(4, 3, generator=gen))
        mine = torch.nn.Parameter(ref.detach().clone())
        ref_opt = torch.optim.Adam([ref], lr=1e-2, fused=True, weight_decay=0.01)
        fast_opt = torch.optim.Adam([mine], lr=1e-2, fused=True, weight_decay=0.01)
        fast = AdamStep(fast_opt, _checked=True)
        for _ in range(3):
            grad = torch.randn(4, 3, generator=gen)
            for p in (ref, mine):
                p.grad = grad.clone() if p.grad is None else p.grad.copy_(grad)
            ref_opt.step()
            fast.step()
        ref_state, fast_state = ref_opt.state[ref], fast_opt.state[mine]
        return fast.direct_steps == 2 and torch.equal(ref, mine) and all(
            torch.equal(ref_state[key], fast_state[key]) for key in _STATE_KEYS)
    except Exception:  # any failure of the private path means: use step()
        return False


def _only_scheduler_tracking(opt: torch.optim.Optimizer) -> bool:
    """Whether ``opt.step`` is ``Adam.step`` wrapped once by an LR scheduler's call tracking (which only sets
    ``opt._opt_called``)."""
    step = vars(opt).get("step")
    return bool(getattr(step, "_wrapped_by_lr_sched", False)) and \
        getattr(step, "__wrapped__", None) is torch.optim.Adam.step


class AdamStep:
    """``zero_grad()`` and ``step()`` (or ``adam_step()``) of one fused ``torch.optim.Adam``, calling its kernel
    directly when that is exact; ``direct_steps`` and ``fallback_steps`` count how each call was served."""

    def __init__(self, optimizer: torch.optim.Optimizer, _checked: bool = False) -> None:
        self.optimizer = optimizer
        #: whether the direct kernel call may be used at all on this torch (see direct_step_ok)
        self.direct = _checked or direct_step_ok()
        self.direct_steps = 0
        self.fallback_steps = 0
        self._lists: Optional[Tuple[List[torch.Tensor], ...]] = None
        self._state: Any = None  # the optimizer.state the lists were read from
        self._group: Any = None  # the param group they belong to
        #: the parameters' ``step`` counts as one 1-d tensor whose elements the state's ``step`` entries view
        self._step_counts: Optional[torch.Tensor] = None

    def zero_grad(self) -> None:
        """Set every ``.grad`` to None, as ``optimizer.zero_grad()`` does, without its overhead."""
        group = self._usable_group()
        lists = self._valid_lists(group) if group is not None else None
        if lists is None:
            self.optimizer.zero_grad(set_to_none=True)
        else:
            for p in lists[0]:
                p.grad = None

    def step(self) -> None:
        """One Adam step: the fused kernel directly when that is exact, else ``optimizer.step()``."""
        group = self._usable_group()
        lists = self._valid_lists(group) if group is not None else None
        grads = None if lists is None else [p.grad for p in lists[0]]  # read at every step: .grad may be new
        if grads is None or any(g is None or g.is_sparse for g in grads):
            # no valid lists, or a parameter without a gradient (step() skips it) or a sparse one (step() raises)
            self.optimizer.step()
            self.fallback_steps += 1
            if lists is None:
                self._lists = self._collect(group) if group is not None else None
            return
        params, exp_avgs, exp_avg_sqs, steps = lists
        beta1, beta2 = group["betas"]
        kernel = getattr(torch, _KERNEL_NAMES[1] if group.get("decoupled_weight_decay", False) else _KERNEL_NAMES[0])
        with torch.no_grad():
            if self._step_counts is not None:
                self._step_counts.add_(1)  # every parameter's step count: views of this one tensor
            else:
                torch._foreach_add_(steps, 1)
            kernel(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=group["lr"],
                   beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
                   maximize=False, grad_scale=None, found_inf=None)
        if "step" in vars(self.optimizer):  # an LR scheduler's wrapper: what it records, the direct call records
            self.optimizer._opt_called = True
        self.direct_steps += 1

    __call__ = step

    def _usable_group(self) -> Optional[dict]:
        """The optimizer's only param group if the direct call computes what ``step()`` would, else None."""
        opt = self.optimizer
        if not self.direct or type(opt) is not torch.optim.Adam or len(opt.param_groups) != 1:
            return None  # another class or several groups
        if "step" in vars(opt) and not _only_scheduler_tracking(opt):
            return None  # step() replaced by something the direct call would skip
        if _has_step_hooks(opt) or not _no_global_hooks():
            return None  # a step hook (DDP's gradient averaging is one) must never be skipped
        group = opt.param_groups[0]
        if not group.get("fused") or group.get("amsgrad") or group.get("maximize") or group.get("capturable") \
                or group.get("differentiable") or isinstance(group["lr"], torch.Tensor) \
                or any(isinstance(beta, torch.Tensor) for beta in group["betas"]):
            return None
        return group

    def _valid_lists(self, group: dict) -> Optional[Tuple[List[torch.Tensor], ...]]:
        """The cached ``(params, exp_avgs, exp_avg_sqs, steps)`` if they still hold this group's parameters and
        state (``.grad`` is read at every step)."""
        lists = self._lists
        if lists is None or self.optimizer.state is not self._state or group is not self._group:
            return None
        return lists

    def _collect(self, group: dict) -> Optional[Tuple[List[torch.Tensor], ...]]:
        """The kernel's argument lists but the gradients, in the order ``step()`` passes them; None unless
        every parameter has a gradient and a complete state on one device and dtype."""
        state = self.optimizer.state
        params = [p for p in group["params"] if p.grad is not None]
        if len(params) != len(group["params"]) or not params:
            return None
        first = params[0]
        for p in params:
            entry = state.get(p)
            if entry is None or any(key not in entry for key in _STATE_KEYS) or p.grad.is_sparse or p.is_complex() \
                    or p.device != first.device or p.dtype != first.dtype:
                return None
        self._state, self._group = state, group
        self._step_counts = self._share_step_counts(params)
        return (params, [state[p]["exp_avg"] for p in params], [state[p]["exp_avg_sq"] for p in params],
                [state[p]["step"] for p in params])

    def _share_step_counts(self, params: List[torch.Tensor]) -> Optional[torch.Tensor]:
        """Make each parameter's ``step`` entry a 0-d view of one 1-d tensor, so that one ``add_`` counts every
        step; None (nothing changed) unless every count is a 0-d tensor of one dtype and device."""
        state = self.optimizer.state
        steps = [state[p]["step"] for p in params]
        first = steps[0]
        if any(t.dim() != 0 or t.dtype != first.dtype or t.device != first.device or t.requires_grad
               for t in steps):
            return None
        counts = torch.stack([t.detach() for t in steps])
        for i, p in enumerate(params):
            state[p]["step"] = counts[i]
        return counts
